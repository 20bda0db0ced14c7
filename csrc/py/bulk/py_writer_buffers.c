/* CommandWriter's buffers (py_writer_object.h): a full buffer handed over to the queue, and
   put_batch, which adopts the buffers of an Arrow record batch's text written ahead or
   writes its rows straight into the writer's buffers. */
#include "py_writer_object.h"

#include "py_encode_batch.h"
#include "py_piece.h"

#include "buffer_pool.h"

#include <stdatomic.h>

/* New reference: the full buffer as a Piece, None when nothing is buffered. */
PyObject *bw_writer_take(WriterObject *self) {
    size_t len, cap, first_run = bw_command_writer_first_run(&self->w);
    char *mem = bw_command_writer_detach(&self->w, &len, &cap);
    if (mem == NULL)
        Py_RETURN_NONE;
    PyObject *piece = bw_piece_from_memory(mem, len, cap, 1);
    if (piece != NULL)
        bw_piece_set_pending((bw_piece_object *)piece, first_run);
    return piece;
}

/* A full queue means the consumer is behind (with pending float text, writing it): rather
   than wait for room, this thread writes the text of the buffer it is about to hand over,
   with the GIL released, so that both threads format when formatting is the bound. The
   piece is not shared yet: nobody else settles it meanwhile. The next documents' float text
   is then written as they are stored, until a hand-over finds room again (consumer_behind). */
static void command_writer_settle_when_full(WriterObject *self, bw_piece_object *piece) {
    bw_hq *q = &self->queue->q;
    int full = bw_hq_len(q) >= bw_hq_capacity(q);
    self->w.consumer_behind = full;
    if (!full || atomic_load_explicit(&piece->pending, memory_order_acquire) == BW_PIECE_SETTLED)
        return;
    Py_BEGIN_ALLOW_THREADS
    bw_piece_settle(piece);
    Py_END_ALLOW_THREADS
}

/* Hands the full buffer over to the queue, waiting for room with the GIL released. 1 handed
   over; 0 the consumer is gone (the buffer is dropped); -1 with an exception set, Ctrl-C or
   out of memory: handover_interrupted then says the body can no longer be trusted whole. */
int bw_writer_hand_over(WriterObject *self) {
    /* The reference is given to the queue: the moment the pump has sent the buffer, nothing
       else holds it and its memory goes back. A reference kept here until this thread got
       the GIL again could keep a sent buffer alive through the pump's next blocking send,
       one buffer over the memory bound. */
    PyObject *piece = bw_writer_take(self);
    if (piece != NULL)
        command_writer_settle_when_full(self, (bw_piece_object *)piece);
    int taken = piece != NULL ? bw_queue_put_steal(self->queue, piece) : -1;
    /* A Ctrl-C that came during the wait, just before the buffer was taken, would be raised
       by the interpreter as this call returns, with no trace of the hand-over: it is taken
       here, so that it counts as an interrupted hand-over. */
    if (taken > 0 && PyErr_CheckSignals() < 0)
        taken = -1;
    if (taken < 0)
        self->handover_interrupted = 1;
    return taken;
}
/* ---- Arrow record batches (load_parquet, load_arrow) ---- */

/* What put_batch's sink needs: the writer, the body bytes its buffer held when the last
   hand-over (or the call) began, and whether a buffer of the batch was handed over. */
typedef struct {
    WriterObject *self;
    size_t mark;
    int handed_over;
} batch_sink;

/* bw_batch_sink of put_batch: the full buffer goes to the queue; the next rows go into a
   fresh one. 1, 0 (the consumer is gone), or -1 (handover_interrupted is set). */
static int hand_over_batch_buffer(void *ctx, bw_buf *out) {
    batch_sink *sink = ctx;
    bw_command_writer *w = &sink->self->w;
    w->bytes += out->len - sink->mark;
    sink->mark = 0;
    sink->handed_over = 1;
    int taken = bw_writer_hand_over(sink->self);
    if (taken > 0 && bw_command_writer_ensure_buffer(w) < 0) {
        sink->self->handover_interrupted = 1;
        return -1;
    }
    return taken;
}

/* Takes a buffer of text written ahead (`len` bytes of complete commands, each after its
   separator) into the body without copying it when it holds more than the threshold: what
   the current buffer holds is handed over first, then the buffer itself. A shorter one (a
   batch's last) becomes the current buffer when that is empty, else is appended to it (a
   copy of less than the threshold), handed over once past the threshold. The memory is the
   writer's from the call on (freed or handed over whatever happens). 1, 0 (the consumer is
   gone) or -1 with an exception set. */
static int command_writer_adopt(WriterObject *self, char *data, size_t len, size_t cap) {
    bw_command_writer *w = &self->w;
    int taken = 1;
    w->bytes += len;
    if (len > w->threshold && w->buf.len > 0 && (taken = bw_writer_hand_over(self)) <= 0) {
        bw_pool_release(data, cap);
        return taken;
    }
    if (w->buf.len == 0) {
        bw_pool_release(w->buf.data, w->buf.cap);
        w->buf = (bw_buf){.data = data, .len = len, .cap = cap};
    } else {
        int appended = bw_buf_append(&w->buf, data, len);
        bw_pool_release(data, cap);
        if (appended < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return bw_command_writer_over_threshold(w) ? bw_writer_hand_over(self) : 1;
}

/* put_batch of a batch whose text was written ahead (prepare_batch's buffer_size), after
   bw_command_writer_end_open: its buffers go into the body in order (command_writer_adopt),
   its leading ',' made '[' when it holds the body's first command. 1, 0 (the consumer is
   gone) or -1 with an exception set (the body is then incomplete). Every buffer not taken
   goes back to the pool. */
static int command_writer_put_ahead(WriterObject *self, bw_batch_job *job) {
    bw_command_writer *w = &self->w;
    int first = !w->started, taken = 1;
    bw_command_writer_command_done(w);
    for (size_t i = 0; taken > 0 && i < bw_batch_job_text_count(job); i++) {
        size_t len, cap;
        char *data = bw_batch_job_take_text(job, i, &len, &cap);
        if (data == NULL)
            continue;
        if (first) {
            data[0] = '[';
            first = 0;
        }
        taken = command_writer_adopt(self, data, len, cap);
    }
    bw_batch_job_drop_text(job);
    return taken;
}

/* put_batch(prepared) -> int | None. New reference: the rows written; None when the
   consumer is gone (a full buffer was dropped). prepared (prepare_batch's) was validated
   whole, so writing it cannot fail on a row; the rows go straight into the writer's buffers,
   with the GIL released, each buffer handed over once it holds more than the threshold. A
   failure before a buffer of the batch was handed over leaves the body as it was; after
   (Ctrl-C while the queue was full, out of memory) it sets handover_interrupted: the body is
   incomplete. */
PyObject *bw_writer_put_batch(WriterObject *self, PyObject *prepared) {
    if (command_writer_enter(self) < 0)
        return NULL;
    PyObject *result = NULL;
    bw_command_writer *w = &self->w;
    bw_batch_job *job = bw_prepared_batch_job(prepared);
    if (job == NULL)
        goto done;
    if (self->queue == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "put_batch() needs a writer made with queue=");
        goto done;
    }
    int64_t rows = bw_batch_job_rows(job);
    if (rows == 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    if (bw_batch_job_text_count(job) > 0) { /* written ahead, by an encoding thread */
        size_t before = w->buf.data != NULL ? w->buf.len : 0;
        if (bw_command_writer_end_open(w) < 0) /* the body as it was */
            goto done;
        w->bytes += w->buf.len - before; /* the end of an open counters command */
        int rc = command_writer_put_ahead(self, job);
        w->commands += (Py_ssize_t)rows;
        if (rc < 0)
            self->handover_interrupted = 1;
        else
            result = rc > 0 ? PyLong_FromLongLong((long long)rows) : Py_NewRef(Py_None);
        goto done;
    }
    if (bw_command_writer_ensure_buffer(w) < 0)
        goto done;
    size_t start = w->buf.len;
    int started = w->started;
    bw_open_command open = w->open;
    /* '[' or ',' (and the end of an open counters command) into the same buffer as the rows */
    if (bw_command_writer_begin_command(w) < 0)
        goto done;
    bw_command_writer_command_done(w);
    batch_sink sink = {self, start, 0};
    int rc = bw_batch_job_write(job, &w->buf, 1, w->threshold, hand_over_batch_buffer, &sink);
    if (rc < 0 && !sink.handed_over) { /* nothing of the batch left the writer: take it back */
        w->buf.len = start;
        w->started = started;
        w->open = open;
        goto done;
    }
    w->commands += (Py_ssize_t)rows;
    if (rc < 0) {
        self->handover_interrupted = 1;
        goto done;
    }
    if (rc > 0) /* what is left (at most the threshold) waits for the next command */
        w->bytes += w->buf.len - sink.mark;
    result = rc > 0 ? PyLong_FromLongLong((long long)rows) : Py_NewRef(Py_None);
done:
    command_writer_leave(self);
    return result;
}
