/* Command framing, the state a CommandWriter (py_command_writer.c) writes with: bulk insert
   commands framed into buffers, with the size threshold.

   The body is one JSON array of commands, `[` cmd `,` cmd ... `]`, each command exactly
   {"Id":<id>,"Type":"PUT","Document":<document>} where the document is the entity's JSON
   with its "Id" (and "@metadata") members left out and "@metadata" appended last. Commands
   are encoded straight into the current buffer; once it holds more than `threshold` bytes
   the caller detaches it (the memory itself moves; nothing is copied) and the next command
   starts a fresh one. Binding layer: it drives the object walker. */
#ifndef BW_PY_COMMAND_FRAMING_H
#define BW_PY_COMMAND_FRAMING_H
#include "py_encoder.h"

/* A counters or time series command stays open across calls: its operations are appended
   one by one, and the next other command (or the end of the body) closes it. */
typedef enum { BW_OPEN_NONE, BW_OPEN_COUNTERS, BW_OPEN_SERIES } bw_open_command;

typedef struct {
    bw_buf buf;           /* the current buffer; data == NULL until something is written */
    size_t threshold;     /* hand over once buf.len exceeds this */
    int started;          /* '[' has been written */
    int finished;         /* ']' has been written: nothing more may be added */
    Py_ssize_t commands;  /* commands written */
    size_t bytes;         /* body bytes written (handed over or still buffered; pending
                             float runs at their reserved room) */
    size_t handovers;     /* buffers detached */
    bw_encode_options opts;
    bw_walker *walker;    /* heap: its open-container stack is large */
    bw_open_command open; /* the command left open */
    int open_written;     /* a time series: its command was started (it had an entry) */
    size_t in_batch;      /* operations in the open command (at most BW_COMMAND_BATCH_MAX) */
    /* Lists of floats in documents become pending runs of buf (json_array.h): their text is
       written by whoever settles the handed-over buffer (bw_piece_settle), off this thread. */
    int pending_floats;
    /* The last hand-over found the queue full: the consumer is behind (the server or the
       network is the bound), so deferring only adds the copy and a second pass; while this is
       set, lists of floats are written as text here, where loading the float objects overlaps
       the text of the ones loaded before. The next hand-over that finds room clears it. */
    int consumer_behind;
    bw_json_runs runs;    /* the current buffer's pending runs */
} bw_command_writer;

/* 0, or -1 with MemoryError set. */
int bw_command_writer_init(bw_command_writer *w, size_t threshold, const bw_encode_options *opts);
void bw_command_writer_free(bw_command_writer *w);

/* Appends one PUT command. id is a str; metadata a dict walked as the "@metadata" value, or
   when metadata_text (bytes from bw_command_writer_metadata_text of that dict) is not NULL,
   that text written as it is; skip_keys a tuple of str left out of the entity's top-level
   object; own_members NULL, or the entity's members as bw_entity_plain_members gave them
   (with the writer's walker), no Python code run since. 0, or -1 with an exception set, and
   then the buffer is exactly as it was before the call. */
int bw_command_writer_put(bw_command_writer *w, PyObject *id, PyObject *entity,
                          PyObject *own_members, PyObject *metadata, PyObject *metadata_text,
                          PyObject *skip_keys);

/* The "@metadata" value bw_command_writer_put writes for metadata, written once: a new
   reference to its bytes when every key and value of the dict is an exact str (its text is
   then the same for every command), else a new reference to None (walked per command). NULL
   with an exception set. */
PyObject *bw_command_writer_metadata_text(bw_command_writer *w, PyObject *metadata);

/* A current buffer to write into (a fresh one after a hand-over). 0, or -1 with MemoryError. */
int bw_command_writer_ensure_buffer(bw_command_writer *w);
/* Before a new command of another kind: RuntimeError while a time series is open (it must be
   closed first); otherwise writes the end of an open counters command and the separator ('['
   or ','). 0, or -1 with an exception set. On success the caller, once its command is
   written, calls bw_command_writer_command_done; on failure it rolls the buffer back. */
int bw_command_writer_begin_command(bw_command_writer *w);
/* bw_command_writer_begin_command without the separator, for commands whose text brings its
   own (a batch's text written ahead): the checks, a current buffer, the end of an open
   counters command. 0, or -1 with an exception set (the buffer then as it was). */
int bw_command_writer_end_open(bw_command_writer *w);
static inline void bw_command_writer_command_done(bw_command_writer *w) {
    w->started = 1;
    w->open = BW_OPEN_NONE;
}
/* RuntimeError when a time series is open. 0 or -1. */
int bw_command_writer_check_no_series(const bw_command_writer *w);
/* Ends the array (`]`, or `[]` when nothing was written). 0, or -1 with MemoryError. */
int bw_command_writer_finish(bw_command_writer *w);

static inline int bw_command_writer_over_threshold(const bw_command_writer *w) {
    return w->buf.len > w->threshold;
}

/* Hands the current buffer's memory to the caller (free() it, or give it back with
   bw_pool_release so that a later buffer reuses its pages) and starts none: the next
   put allocates a fresh buffer. NULL (and *len 0) when nothing is buffered. *cap receives
   the allocation size, for memory accounting. */
char *bw_command_writer_detach(bw_command_writer *w, size_t *len, size_t *cap);
/* The offset of the current buffer's first pending run (BW_JSON_RUN_NONE: none); read it
   before bw_command_writer_detach, which forgets the runs with the buffer. */
static inline size_t bw_command_writer_first_run(const bw_command_writer *w) {
    return w->runs.first;
}
/* Before commands already encoded (BulkWriter.store_encoded): writes the separator ('[' for
   the body's first command, ',' otherwise; an open counters command is ended first) and
   counts `count` commands; the caller then appends or hands over their bytes. 0, or -1 with
   an exception set (the buffer then unchanged). */
int bw_command_writer_begin_encoded(bw_command_writer *w, Py_ssize_t count);
#endif
