/* CommandWriter's guards (py_writer_object.h): what its refusals say, the refusal of a call
   from inside another, and the methods of its lifecycle that only check: hold / release /
   claim / check_process, and fail. */
#include "py_writer_object.h"

/* What the writer's guard says (py_guard.h). A writer belongs to the process that made it:
   in a forked child its queue's consumer (the parent's sender), the request and the
   connection are the parent's. It takes documents from one thread: checking only for
   overlapping calls caught a second thread at random (only when the GIL switched inside a
   call); the owner check refuses every call from another thread, before anything changes.
   A call while another is under way is refused by bw_writer_refuse_reentry. */
const bw_guard_words bw_writer_words = {
    .what = "this BulkWriter (or BulkInsert)",
    .owned = "its body, its sender thread, its request and its connection",
    .other_thread = "a bulk insert takes documents from one thread only: this BulkWriter (or "
                    "BulkInsert) belongs to the thread that first stored into it, and this "
                    "call came from another thread; use one per producer thread",
};

/* RuntimeError for a call made while another call of the same writer is under way: from its
   own thread, so from inside it (a hook, a to_json, a __del__, a gc or weakref callback, a
   signal handler). -1. */
int bw_writer_refuse_reentry(WriterObject *self) {
    if (self->held != NULL && !self->guard.busy)
        PyErr_Format(PyExc_RuntimeError,
                     "this BulkWriter (or BulkInsert) is in the middle of %U: a call from inside "
                     "it (a hook, to_json, __del__, a gc or weakref callback, a signal handler) "
                     "cannot use the same writer", self->held);
    else
        PyErr_SetString(PyExc_RuntimeError,
                        "this BulkWriter (or BulkInsert) is in the middle of another call: a call "
                        "from inside it (a hook, to_json, __del__, a gc or weakref callback, a "
                        "signal handler) cannot use the same writer");
    return -1;
}

/* The process and the thread. 0, or -1 with RuntimeError set. */
static int command_writer_check_thread(WriterObject *self) {
    return bw_guard_check(&self->guard, &bw_writer_words, 0, bw_origin_inherited(&self->origin));
}

/* fail(error) -> None (a new reference): the body can no longer be completed: error is kept
   as the writer's failure (the first one stays) and the queue's consumer side is closed
   (waiting buffers are dropped, the next hand-over finds the consumer gone). RuntimeError in
   a forked child. */
PyObject *bw_writer_fail(WriterObject *self, PyObject *error) {
    if (command_writer_check_process(self) < 0)
        return NULL;
    if (self->failure == NULL && error != Py_None)
        self->failure = Py_NewRef(error);
    if (self->queue == NULL)
        Py_RETURN_NONE;
    return PyObject_CallMethod((PyObject *)self->queue, "close_consumer", NULL);
}

/* hold(what) -> None (a new reference): a producer call made of several steps in Python
   (`what` names it: store_encoded's pieces, the start of the request) is under way. Until
   release() every other producer call raises RuntimeError, so that nothing lands between
   its steps. The checks of command_writer_enter
   come first (the caller becomes the producer). */
PyObject *bw_writer_hold(WriterObject *self, PyObject *what) {
    if (!PyUnicode_Check(what)) {
        PyErr_Format(PyExc_TypeError, "what must be a str, not %.100s", Py_TYPE(what)->tp_name);
        return NULL;
    }
    if (command_writer_enter(self) < 0)
        return NULL;
    self->held = Py_NewRef(what);
    command_writer_leave(self);
    Py_RETURN_NONE;
}

/* release() -> None (a new reference): the call that held the writer is over (also after
   a failure). */
PyObject *bw_writer_release(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_check_thread(self) < 0)
        return NULL;
    Py_CLEAR(self->held);
    Py_RETURN_NONE;
}

/* claim() -> None (a new reference): the calling thread becomes the producer; RuntimeError
   (nothing changes) in a forked child, from another thread, or while a call of this writer
   is under way (from inside it). */
PyObject *bw_writer_claim(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_enter(self) < 0)
        return NULL;
    command_writer_leave(self);
    Py_RETURN_NONE;
}

/* check_process() -> None (a new reference): RuntimeError in a forked child of the process
   that made the writer (from any thread). */
PyObject *bw_writer_check_process(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_check_process(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}
