/* The CommandWriter's object and what its files share, private to them: py_command_writer.c
   (the type, store() and the document conventions it applies), py_writer_guard.c (the checks
   every call makes, hold / release / claim, fail), py_writer_buffers.c (full buffers handed
   over, a batch's buffers adopted: put_batch) and py_writer_commands.c (counters, time series,
   attachments and pieces). The checks made on every call are inline here: a store() pays no
   call for them beyond the guard's own. */
#ifndef BW_PY_WRITER_OBJECT_H
#define BW_PY_WRITER_OBJECT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_command_framing.h"
#include "py_fork_origin.h"
#include "py_guard.h"
#include "py_handover_queue.h"

typedef struct {
    PyObject_HEAD
    bw_command_writer w;
    int ready;
    bw_guard guard;            /* busy: a producer call is under way (command_writer_enter);
                                  owner: the producer's thread, the first to call a store
                                  method */
    PyObject *held;            /* what holds the writer (hold()): a Python call's name */
    bw_origin origin;          /* the process that made it */
    bw_queue_object *queue;    /* where full buffers go (store); NULL: put() returns them */
    PyObject *class_info;      /* class_info(cls) -> (id prefix, metadata defaults[, excluded]) */
    PyObject *default_hook;    /* the walker's callable default hook, or NULL */
    PyObject *classes;         /* dict: cls -> what class_info gave, asked once per class */
    Py_ssize_t generated;      /* ids generated so far: the next one ends with this + 1 */
    int handover_interrupted;  /* store() was interrupted handing a full buffer over */
    PyObject *counters_id;     /* the document of the open counters command */
    PyObject *series_id;       /* the document and name of the open (or next) time series */
    PyObject *series_name;
    PyObject *failure;         /* why the body can no longer be completed (fail()), or NULL */
    int closed;                /* the producer side is closed: store() refuses */
    PyObject *on_failure;      /* on_failure(writer, event): store()'s refusals, or NULL */
    /* the last class asked and its entry of `classes` (both borrowed: `classes` holds them
       until the writer is cleared, which clears these too) */
    PyTypeObject *last_class;
    PyObject *last_info;
} WriterObject;

/* What the writer's guard says (py_writer_guard.c). */
extern const bw_guard_words bw_writer_words;

/* RuntimeError for a call made while another call of the same writer is under way: from its
   own thread, so from inside it (a hook, a to_json, a __del__, a gc or weakref callback, a
   signal handler). -1. */
int bw_writer_refuse_reentry(WriterObject *self);

/* The process check alone. 0, or -1 with RuntimeError set. */
static inline int command_writer_check_process(WriterObject *self) {
    return bw_check_origin(&self->origin, bw_writer_words.what, bw_writer_words.owned);
}

/* The checks of every producer call, made before anything changes: the process, the thread,
   no other call under way (a call from inside one would write into the middle of its
   command). On success the call is under way (busy) until command_writer_leave. 0, or -1
   with RuntimeError set. */
static inline int command_writer_enter(WriterObject *self) {
    int rc = bw_guard_enter(&self->guard, &bw_writer_words, 0,
                            bw_origin_inherited(&self->origin));
    if (rc == BW_GUARD_BUSY)
        return bw_writer_refuse_reentry(self);
    if (rc == 0 && self->held != NULL) {
        bw_guard_leave(&self->guard);
        return bw_writer_refuse_reentry(self);
    }
    return rc;
}

static inline void command_writer_leave(WriterObject *self) { bw_guard_leave(&self->guard); }

/* A producer call's body, run after command_writer_enter: a new reference, or NULL with an
   exception set. */
typedef PyObject *(*writer_call)(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);

/* New reference: call, under command_writer_enter's checks. */
static inline PyObject *command_writer_run(WriterObject *self, writer_call call,
                                           PyObject *const *args, Py_ssize_t nargs) {
    if (command_writer_enter(self) < 0)
        return NULL;
    PyObject *result = call(self, args, nargs);
    command_writer_leave(self);
    return result;
}

/* The methods whose body is a *_call function: bw_writer_<name>, run under
   command_writer_run; each returns a new reference (see its *_call). */
#define WRITER_FASTCALL(name)                                                               \
    PyObject *bw_writer_##name(WriterObject *self, PyObject *const *args,                  \
                               Py_ssize_t nargs) {                                         \
        return command_writer_run(self, name##_call, args, nargs);                         \
    }
#define WRITER_NOARGS(name)                                                                 \
    PyObject *bw_writer_##name(WriterObject *self, PyObject *unused) {                     \
        (void)unused;                                                                      \
        return command_writer_run(self, name##_call, NULL, 0);                             \
    }

/* py_writer_buffers.c: the full buffer as a Piece (a new reference; None when nothing is
   buffered), and handed over to the queue (1, 0 the consumer is gone, -1 with an exception
   set: handover_interrupted is then set). */
PyObject *bw_writer_take(WriterObject *self);
int bw_writer_hand_over(WriterObject *self);

/* The methods the type's table names, each defined in the file of its concern; each returns
   a new reference, or NULL with an exception set. */
PyObject *bw_writer_put(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_finish(WriterObject *self, PyObject *unused);
PyObject *bw_writer_put_batch(WriterObject *self, PyObject *prepared);
PyObject *bw_writer_increment(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_series_begin(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_series_append(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_series_end(WriterObject *self, PyObject *unused);
PyObject *bw_writer_attachment(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_put_pieces(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *bw_writer_fail(WriterObject *self, PyObject *error);
PyObject *bw_writer_hold(WriterObject *self, PyObject *what);
PyObject *bw_writer_release(WriterObject *self, PyObject *unused);
PyObject *bw_writer_claim(WriterObject *self, PyObject *unused);
PyObject *bw_writer_check_process(WriterObject *self, PyObject *unused);
#endif
