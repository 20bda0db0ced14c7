/* CommandWriter: the C half of a bulk insert's producer side. It applies the document
   conventions (py_conventions.c), frames each PUT command into its buffer (py_command_framing.c)
   and hands every full buffer over to its queue itself, so that a stored document's bytes
   go from the walker to the consumer without a trip through Python. BulkWriter (Python)
   wraps it with the body's lifecycle: failure, close, compression, consumers. This file: the
   type, store() and put / finish; its other rooms share py_writer_object.h (the guards,
   the buffers and a batch's, the other commands). */
#include "py_command_writer.h"
#include "py_writer_object.h"

#include "py_bulk_commands.h"
#include "py_conventions.h"
#include "py_state.h"

#include "int_text.h"

#include <string.h>

/* New reference. */
static PyObject *Writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"buffer_size", "queue", "class_info", "default",
                               "defer_float_text", "on_failure", NULL};
    Py_ssize_t buffer_size = 1 << 20;
    PyObject *queue = Py_None, *class_info = Py_None, *default_hook = bw_entity_sentinel();
    PyObject *on_failure = Py_None;
    int defer_float_text = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n$OOOpO:CommandWriter", keywords,
                                     &buffer_size, &queue, &class_info, &default_hook,
                                     &defer_float_text, &on_failure))
        return NULL;
    if (buffer_size <= 0) {
        PyErr_Format(PyExc_ValueError, "buffer_size must be a positive number of bytes, not %zd",
                     buffer_size);
        return NULL;
    }
    if (queue != Py_None && !bw_is_queue(queue)) {
        PyErr_Format(PyExc_TypeError, "queue must be a HandoverQueue or None, not %.100s",
                     Py_TYPE(queue)->tp_name);
        return NULL;
    }
    if (class_info != Py_None && !PyCallable_Check(class_info)) {
        PyErr_Format(PyExc_TypeError, "class_info must be callable or None, not %.100s",
                     Py_TYPE(class_info)->tp_name);
        return NULL;
    }
    if (on_failure != Py_None && !PyCallable_Check(on_failure)) {
        PyErr_Format(PyExc_TypeError, "on_failure must be callable or None, not %.100s",
                     Py_TYPE(on_failure)->tp_name);
        return NULL;
    }
    int custom_hook = default_hook != bw_entity_sentinel() && default_hook != Py_None;
    if (custom_hook && !PyCallable_Check(default_hook)) {
        PyErr_Format(PyExc_TypeError,
                     "default must be None, bulkwire.ENTITY or a callable, not %.100s",
                     Py_TYPE(default_hook)->tp_name);
        return NULL;
    }
    WriterObject *self = (WriterObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    /* the options borrow the hook: the writer keeps it alive (default_hook) */
    bw_encode_options opts = {.hook_kind = custom_hook ? BW_HOOK_CALLABLE
                                           : default_hook == Py_None ? BW_HOOK_NONE
                                                                     : BW_HOOK_ENTITY,
                              .hook = custom_hook ? default_hook : NULL, .ensure_ascii = 1,
                              .float32_shortest = 0};
    if (custom_hook)
        self->default_hook = Py_NewRef(default_hook);
    if (bw_command_writer_init(&self->w, (size_t)buffer_size, &opts) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->ready = 1;
    bw_origin_record(&self->origin);
    self->w.pending_floats = defer_float_text;
    self->classes = PyDict_New();
    if (self->classes == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    if (queue != Py_None)
        self->queue = (bw_queue_object *)Py_NewRef(queue);
    if (class_info != Py_None)
        self->class_info = Py_NewRef(class_info);
    if (on_failure != Py_None)
        self->on_failure = Py_NewRef(on_failure);
    return (PyObject *)self;
}

/* The class cache may hold a class whose attributes lead back to this writer. */
static int Writer_traverse(WriterObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self)); /* a heap type */
    Py_VISIT(self->queue);
    Py_VISIT(self->class_info);
    Py_VISIT(self->classes);
    Py_VISIT(self->default_hook);
    Py_VISIT(self->counters_id);
    Py_VISIT(self->series_id);
    Py_VISIT(self->series_name);
    Py_VISIT(self->failure);
    Py_VISIT(self->on_failure);
    return 0;
}

static int Writer_clear(WriterObject *self) {
    self->last_class = NULL;
    self->last_info = NULL;
    Py_CLEAR(self->queue);
    Py_CLEAR(self->class_info);
    Py_CLEAR(self->classes);
    Py_CLEAR(self->default_hook);
    Py_CLEAR(self->counters_id);
    Py_CLEAR(self->series_id);
    Py_CLEAR(self->series_name);
    Py_CLEAR(self->held);
    Py_CLEAR(self->failure);
    Py_CLEAR(self->on_failure);
    return 0;
}

static void Writer_dealloc(WriterObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->ready)
        bw_command_writer_free(&self->w);
    Writer_clear(self);
    bw_heap_free((PyObject *)self);
}

/* 1 when info is what class_info must give: (id prefix: str, metadata defaults: dict) and
   optionally the members the body leaves out (a tuple of str; else BODY_EXCLUDED_KEYS). */
static int class_info_is_valid(PyObject *info) {
    if (!PyTuple_CheckExact(info))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(info);
    if ((n != 2 && n != 3) || !PyUnicode_Check(PyTuple_GET_ITEM(info, 0)) ||
        !PyDict_Check(PyTuple_GET_ITEM(info, 1)))
        return 0;
    if (n == 2)
        return 1;
    PyObject *excluded = PyTuple_GET_ITEM(info, 2);
    if (!PyTuple_CheckExact(excluded))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(excluded); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(excluded, i)))
            return 0;
    return 1;
}

/* The items of the conventions of a class the writer keeps (command_writer_class_info). */
enum { INFO_PREFIX, INFO_METADATA, INFO_EXCLUDED, INFO_METADATA_TEXT, INFO_ITEMS };

/* New reference: what the writer keeps of class_info(cls)'s answer, a tuple (id prefix, a
   copy of the metadata defaults, the excluded members (BODY_EXCLUDED_KEYS when not given),
   the defaults' "@metadata" text when it is the same for every command, else None). The
   defaults are copied: class_info is asked once per class, and what it answered then is
   what every command of the class gets, the text written once included. */
static PyObject *class_info_kept(WriterObject *self, PyObject *info) {
    PyObject *metadata = NULL, *text = NULL, *kept = NULL;
    metadata = PyDict_Copy(PyTuple_GET_ITEM(info, 1));
    if (metadata == NULL)
        goto cleanup;
    text = bw_command_writer_metadata_text(&self->w, metadata);
    if (text == NULL)
        goto cleanup;
    PyObject *excluded = PyTuple_GET_SIZE(info) == 3 ? PyTuple_GET_ITEM(info, 2)
                                                     : bw_body_excluded_keys();
    kept = PyTuple_Pack(INFO_ITEMS, PyTuple_GET_ITEM(info, 0), metadata, excluded, text);
cleanup:
    Py_XDECREF(metadata);
    Py_XDECREF(text);
    return kept;
}

/* New reference: class_info_kept's tuple for entities of cls, class_info asked once per
   class. */
static PyObject *command_writer_class_info(WriterObject *self, PyTypeObject *cls) {
    if (cls == self->last_class)
        return Py_NewRef(self->last_info);
    PyObject *info = PyDict_GetItemWithError(self->classes, (PyObject *)cls);
    if (info != NULL) {
        self->last_class = cls;
        self->last_info = info;
        return Py_NewRef(info);
    }
    if (PyErr_Occurred())
        return NULL;
    PyObject *answer = PyObject_CallOneArg(self->class_info, (PyObject *)cls);
    if (answer == NULL)
        return NULL;
    if (!class_info_is_valid(answer)) {
        PyErr_SetString(PyExc_TypeError, "class_info() must return (id prefix: str, metadata "
                                         "defaults: dict[, excluded members: tuple of str])");
        Py_DECREF(answer);
        return NULL;
    }
    info = class_info_kept(self, answer);
    Py_DECREF(answer);
    if (info == NULL)
        return NULL;
    if (PyDict_SetItem(self->classes, (PyObject *)cls, info) < 0) {
        Py_DECREF(info);
        return NULL;
    }
    return info;
}

/* New reference: prefix followed by the decimal n, built directly (formatting it took a
   third of the conventions' time per document). */
static PyObject *generated_id(PyObject *prefix, Py_ssize_t n) {
    char digits[BW_INT_TEXT_MAX];
    size_t digits_len = bw_u64_to_text((uint64_t)n, digits);
    if (!PyUnicode_IS_ASCII(prefix)) {
        PyObject *number = PyUnicode_FromStringAndSize(digits, (Py_ssize_t)digits_len);
        if (number == NULL)
            return NULL;
        PyObject *id = PyUnicode_Concat(prefix, number);
        Py_DECREF(number);
        return id;
    }
    Py_ssize_t prefix_len = PyUnicode_GET_LENGTH(prefix);
    PyObject *id = PyUnicode_New(prefix_len + (Py_ssize_t)digits_len, 127);
    if (id == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(id), PyUnicode_1BYTE_DATA(prefix), (size_t)prefix_len);
    memcpy(PyUnicode_1BYTE_DATA(id) + prefix_len, digits, digits_len);
    return id;
}

/* New reference: the id the command gets: the id argument, else the entity's own Id, else
   a generated "<prefix><n>" (checked, naming where it came from). */
static PyObject *command_writer_document_id(WriterObject *self, PyObject *id,
                                            PyObject *own_id, PyObject *info) {
    const char *source = "id";
    if (id == NULL) {
        id = own_id;
        source = "entity's Id";
    }
    if (id == NULL) {
        self->generated++; /* counted before encoding: a failed store keeps its number used */
        return generated_id(PyTuple_GET_ITEM(info, INFO_PREFIX), self->generated);
    }
    if (bw_check_id(id, source) < 0)
        return NULL;
    return Py_NewRef(id);
}

/* The document of store(entity, id=None, metadata=None), its arguments bound (args[1] and
   args[2] None when not given). New reference: the document's id; or None when the document
   is in the body but its full buffer could not be handed over because the consumer is gone
   (the body is incomplete). Raises the conventions' and the encoder's errors (nothing of the
   document is kept), and Ctrl-C while waiting for room in the queue (handover_interrupted). */
static PyObject *store_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)nargs;
    if (self->queue == NULL || self->class_info == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "store() needs a writer made with queue= and "
                                            "class_info=");
        return NULL;
    }
    PyObject *entity = args[0];
    PyObject *id_arg = args[1] != Py_None ? args[1] : NULL;
    PyObject *metadata = args[2] != Py_None ? args[2] : NULL;
    PyObject *info = NULL, *own_metadata = NULL, *own_id = NULL, *id = NULL, *merged = NULL;
    PyObject *members = NULL, *result = NULL;
    /* the entity conventions walk a plain class's instance from the __dict__ found here */
    bw_walker *plain = self->w.opts.hook_kind == BW_HOOK_ENTITY ? self->w.walker : NULL;

    info = command_writer_class_info(self, Py_TYPE(entity));
    if (info == NULL)
        goto cleanup;
    if (bw_entity_members(entity, plain, id_arg == NULL, &own_metadata, &own_id, &members) < 0)
        goto cleanup;
    id = command_writer_document_id(self, id_arg, own_id, info);
    if (id == NULL)
        goto cleanup;
    PyObject *document_metadata = PyTuple_GET_ITEM(info, INFO_METADATA);
    PyObject *metadata_text = PyTuple_GET_ITEM(info, INFO_METADATA_TEXT);
    if (metadata_text == Py_None)
        metadata_text = NULL;
    if (metadata != NULL || own_metadata != NULL) {
        merged = bw_merge_metadata(own_metadata, metadata, document_metadata);
        if (merged == NULL)
            goto cleanup;
        Py_CLEAR(members); /* merging may have run Python code: the walk looks again */
        document_metadata = merged;
        metadata_text = NULL; /* this document's own */
    }
    int handed_over = 1; /* or nothing to hand over */
    PyObject *excluded = PyTuple_GET_ITEM(info, INFO_EXCLUDED);
    int rc = bw_command_writer_put(&self->w, id, entity, members, document_metadata,
                                   metadata_text, excluded);
    if (rc == 0 && bw_command_writer_over_threshold(&self->w))
        handed_over = bw_writer_hand_over(self);
    if (rc < 0 || handed_over < 0)
        goto cleanup;
    result = Py_NewRef(handed_over ? id : Py_None);
cleanup:
    Py_XDECREF(info);
    Py_XDECREF(own_metadata);
    Py_XDECREF(own_id);
    Py_XDECREF(id);
    Py_XDECREF(merged);
    Py_XDECREF(members);
    return result;
}

/* put(id, entity, metadata) -> Piece | None. New reference. The command as given (no
   conventions); the full buffer is returned, not handed over. */
static PyObject *put_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "put() takes 3 arguments (id, entity, metadata), %zd given",
                     nargs);
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "id must be a str, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (!PyDict_Check(args[2])) {
        PyErr_Format(PyExc_TypeError, "metadata must be a dict, not %.100s",
                     Py_TYPE(args[2])->tp_name);
        return NULL;
    }
    int rc = bw_command_writer_put(&self->w, args[0], args[1], NULL, args[2], NULL,
                                   bw_body_excluded_keys());
    if (rc < 0)
        return NULL;
    if (!bw_command_writer_over_threshold(&self->w))
        Py_RETURN_NONE;
    return bw_writer_take(self);
}

/* finish() -> Piece. New reference. Ends the array; returns what is left. */
static PyObject *finish_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args, (void)nargs;
    if (bw_command_writer_finish(&self->w) < 0)
        return NULL;
    return bw_writer_take(self);
}

/* put and finish, run under command_writer_run. */
WRITER_FASTCALL(put)
WRITER_NOARGS(finish)

/* ---- store(): BulkWriter.store itself ---- */

/* The name store()'s argument errors give, as Python names the method they stand for. */
#define STORE_NAME "BulkWriter.store()"

/* store()'s parameters after self, in order, and their names interned (a keyword's name is
   most often the same object). */
static const char *const store_parameters[] = {"entity", "id", "metadata"};
enum { STORE_PARAMETERS = 3 };
static PyObject *store_parameter_names[STORE_PARAMETERS];

/* Binds store()'s arguments as Python binds those of `def store(self, entity, id=None,
   metadata=None)`, with the same TypeError words in the same order (keywords, then too many
   positional arguments, then the missing one). 0 with bound[] set (borrowed references,
   None for id and metadata when not given), or -1 with TypeError set. */
static int store_bind(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject **bound) {
    for (int i = 0; i < STORE_PARAMETERS; i++)
        bound[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t keywords = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < keywords; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int i = 0; i < STORE_PARAMETERS && slot < 0; i++)
            if (name == store_parameter_names[i])
                slot = i;
        for (int i = 0; i < STORE_PARAMETERS && slot < 0; i++)
            if (PyUnicode_CompareWithASCIIString(name, store_parameters[i]) == 0)
                slot = i;
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, STORE_NAME " got an unexpected keyword argument '%S'",
                         name);
            return -1;
        }
        if (bound[slot] != NULL) {
            PyErr_Format(PyExc_TypeError, STORE_NAME " got multiple values for argument '%s'",
                         store_parameters[slot]);
            return -1;
        }
        bound[slot] = args[nargs + k];
    }
    if (nargs > STORE_PARAMETERS) {
        PyErr_Format(PyExc_TypeError, STORE_NAME " takes from 2 to 4 positional arguments but %zd "
                     "were given", nargs + 1);
        return -1;
    }
    if (bound[0] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        STORE_NAME " missing 1 required positional argument: 'entity'");
        return -1;
    }
    for (int i = 1; i < STORE_PARAMETERS; i++)
        if (bound[i] == NULL)
            bound[i] = Py_None;
    return 0;
}

/* NULL with an exception set: on_failure(writer, event) raises what store() raises when the
   writer failed ("failed"), is closed ("closed") or lost a buffer because its consumer is
   gone ("lost"). */
static PyObject *store_refused(WriterObject *self, const char *event) {
    PyObject *done = PyObject_CallFunction(self->on_failure, "Os", (PyObject *)self, event);
    if (done != NULL) {
        Py_DECREF(done);
        PyErr_Format(PyExc_RuntimeError, "on_failure(writer, '%s') returned instead of raising",
                     event);
    }
    return NULL;
}

/* A store() interrupted while it handed a buffer over (Ctrl-C while the queue was full):
   on_failure(writer, "interrupted") records that the body is incomplete, and the store's own
   exception goes on; an exception of on_failure itself replaces it, with the store's as its
   __context__, as an exception raised in an except block would. */
static void store_interrupted(WriterObject *self) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised = PyErr_GetRaisedException();
#else
    PyObject *type, *raised, *traceback;
    PyErr_Fetch(&type, &raised, &traceback);
    PyErr_NormalizeException(&type, &raised, &traceback);
#endif
    PyObject *done = PyObject_CallFunction(self->on_failure, "Os", (PyObject *)self,
                                           "interrupted");
    if (done != NULL) {
        Py_DECREF(done);
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(raised);
#else
        PyErr_Restore(type, raised, traceback);
#endif
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *replaced = PyErr_GetRaisedException();
    PyException_SetContext(replaced, raised); /* steals raised */
    PyErr_SetRaisedException(replaced);
#else
    if (traceback != NULL)
        PyException_SetTraceback(raised, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    PyObject *new_type, *replaced, *new_traceback;
    PyErr_Fetch(&new_type, &replaced, &new_traceback);
    PyErr_NormalizeException(&new_type, &replaced, &new_traceback);
    PyException_SetContext(replaced, raised); /* steals raised */
    PyErr_Restore(new_type, replaced, new_traceback);
#endif
}

/* store(entity, id=None, metadata=None) -> str | None: BulkWriter.store with nothing of
   Python around it. New reference: the document's id (see store_call). With on_failure, the
   writer's lifecycle comes first (after the process check): a failed writer raises its
   failure and a closed one ValueError, both through on_failure; a buffer the gone consumer
   never took raises the failure ("lost"), and an interrupted hand-over is recorded
   ("interrupted") before its exception goes on. Without on_failure: None for the lost
   buffer, as store_call gives it. */
static PyObject *Writer_store(WriterObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    PyObject *bound[STORE_PARAMETERS];
    if (store_bind(args, nargs, kwnames, bound) < 0)
        return NULL;
    if (self->on_failure == NULL)
        return command_writer_run(self, store_call, bound, STORE_PARAMETERS);
    if (command_writer_check_process(self) < 0)
        return NULL;
    if (self->failure != NULL)
        return store_refused(self, "failed");
    if (self->closed)
        return store_refused(self, "closed");
    PyObject *stored = command_writer_run(self, store_call, bound, STORE_PARAMETERS);
    if (stored == NULL) {
        if (self->handover_interrupted)
            store_interrupted(self);
        return NULL;
    }
    if (stored == Py_None) {
        Py_DECREF(stored);
        return store_refused(self, "lost");
    }
    return stored;
}

/* The getset closure of each CommandWriter attribute. */
typedef enum {
    WRITER_COMMANDS,
    WRITER_BYTES,
    WRITER_BUFFERED,
    WRITER_CAPACITY,
    WRITER_HANDOVERS,
    WRITER_BUFFER_SIZE,
    WRITER_FINISHED,
    WRITER_HANDOVER_INTERRUPTED,
} writer_field;

/* New reference. */
static PyObject *Writer_get_field(WriterObject *self, void *closure) {
    switch ((writer_field)(intptr_t)closure) {
    case WRITER_COMMANDS: return PyLong_FromSsize_t(self->w.commands);
    case WRITER_BYTES: return PyLong_FromSize_t(self->w.bytes);
    case WRITER_BUFFERED: return PyLong_FromSize_t(self->w.buf.len);
    case WRITER_CAPACITY: return PyLong_FromSize_t(self->w.buf.cap);
    case WRITER_HANDOVERS: return PyLong_FromSize_t(self->w.handovers);
    case WRITER_BUFFER_SIZE: return PyLong_FromSize_t(self->w.threshold);
    case WRITER_FINISHED: return PyBool_FromLong(self->w.finished);
    case WRITER_HANDOVER_INTERRUPTED: return PyBool_FromLong(self->handover_interrupted);
    }
    Py_RETURN_NONE;
}

/* failure: None, or what fail() kept (or was set). New reference. */
static PyObject *Writer_get_failure(WriterObject *self, void *closure) {
    (void)closure;
    return Py_NewRef(self->failure != NULL ? self->failure : Py_None);
}

static int Writer_set_failure(WriterObject *self, PyObject *value, void *closure) {
    (void)closure;
    Py_XSETREF(self->failure, value == NULL || value == Py_None ? NULL : Py_NewRef(value));
    return 0;
}

/* closed: a bool. New reference. */
static PyObject *Writer_get_closed(WriterObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->closed);
}

static int Writer_set_closed(WriterObject *self, PyObject *value, void *closure) {
    (void)closure;
    int closed = value != NULL ? PyObject_IsTrue(value) : 0;
    if (closed < 0)
        return -1;
    self->closed = closed;
    return 0;
}

static PyMethodDef Writer_methods[] = {
    {"store", (PyCFunction)(void (*)(void))Writer_store, METH_FASTCALL | METH_KEYWORDS,
     "store(entity, id=None, metadata=None) -> str | None\n\nAppend one PUT command under the "
     "document conventions (the id argument, else the entity's Id, else a generated one; the "
     "@metadata merged) and hand the buffer over to the queue when it went over the "
     "threshold, waiting for room with the GIL released. Returns the id; None when the "
     "consumer is gone (the buffer was dropped) and the writer has no on_failure. On an "
     "encoding error nothing of the command stays in the buffer. With on_failure, a failed "
     "or closed writer refuses first, and a lost or interrupted hand-over goes through it "
     "(BulkWriter.store is this method)."},
    {"put", (PyCFunction)(void (*)(void))bw_writer_put, METH_FASTCALL,
     "put(id, entity, metadata) -> Piece | None\n\nAppend one PUT command as given; returns the "
     "buffer when it went over the threshold (the writer starts a new one). On error nothing "
     "of the command stays in the buffer."},
    {"finish", (PyCFunction)bw_writer_finish, METH_NOARGS,
     "finish() -> Piece\n\nEnd the array and return the last buffer."},
    {"put_pieces", (PyCFunction)(void (*)(void))bw_writer_put_pieces, METH_FASTCALL,
     "put_pieces(pieces, count) -> True | None\n\nAppend count commands already encoded (a list "
     "of non-empty bytes-like pieces whose concatenation is complete commands joined by ','; "
     "trusted) after the separator ('[' or ','). Immutable pieces (bytes) of at least the "
     "threshold are handed over without a copy, in slices of about the threshold when longer "
     "than twice that; the rest is copied. Returns True; None when the consumer is gone."},
    {"put_batch", (PyCFunction)bw_writer_put_batch, METH_O,
     "put_batch(prepared) -> int | None\n\nAppend one PUT command per row of a PreparedBatch "
     "(prepare_batch validated every row), encoded as encode_batch encodes them, straight into "
     "the writer's buffers (GIL released), each handed over to the queue once it holds more "
     "than the threshold; the separator ('[' or ',') goes into the same buffer. Returns the "
     "rows; None when the consumer is gone."},
    {"increment", (PyCFunction)(void (*)(void))bw_writer_increment, METH_FASTCALL,
     "increment(id, name, delta) -> True | None\n\nAppend a counter increment: to the open "
     "counters command of the same document, else in a new one (at most 1024 per command). "
     "Returns True; None when a full buffer could not be handed over (the consumer is gone)."},
    {"series_begin", (PyCFunction)(void (*)(void))bw_writer_series_begin, METH_FASTCALL,
     "series_begin(id, name) -> True\n\nOpen a time series: until series_end() the writer "
     "takes only its entries."},
    {"series_append", (PyCFunction)(void (*)(void))bw_writer_series_append, METH_FASTCALL,
     "series_append(timestamp, values, tag) -> True | None\n\nAppend one entry to the open "
     "time series (at most 1024 per command)."},
    {"series_end", (PyCFunction)bw_writer_series_end, METH_NOARGS,
     "series_end() -> None\n\nClose the open time series."},
    {"attachment", (PyCFunction)(void (*)(void))bw_writer_attachment, METH_FASTCALL,
     "attachment(id, name, data, content_type) -> True | None\n\nAppend an AttachmentPUT "
     "command and data's raw bytes after it."},
    {"fail", (PyCFunction)bw_writer_fail, METH_O,
     "fail(error) -> None\n\nThe body can no longer be completed: keep error as the failure "
     "(the first one stays) and close the queue's consumer side."},
    {"hold", (PyCFunction)bw_writer_hold, METH_O,
     "hold(what) -> None\n\nA producer call made of several Python steps (what names it) is "
     "under way: until release(), every producer call raises RuntimeError."},
    {"release", (PyCFunction)bw_writer_release, METH_NOARGS,
     "release() -> None\n\nThe call that held the writer is over."},
    {"claim", (PyCFunction)bw_writer_claim, METH_NOARGS,
     "claim() -> None\n\nMake the calling thread the writer's producer, or raise RuntimeError, "
     "changing nothing, when another thread already is (the first thread to call a store "
     "method owns it), while a call of this writer is under way (from inside it), or in a "
     "forked child."},
    {"check_process", (PyCFunction)bw_writer_check_process, METH_NOARGS,
     "check_process() -> None\n\nRaise RuntimeError in a forked child of the process that "
     "made the writer: its body, sender, request and connection are that process's."},
    {NULL, NULL, 0, NULL},
};

#define WRITER_FIELD(name, doc, which) \
    {name, (getter)Writer_get_field, NULL, doc, (void *)(intptr_t)(which)}
static PyGetSetDef Writer_getset[] = {
    WRITER_FIELD("commands", "Commands written.", WRITER_COMMANDS),
    WRITER_FIELD("bytes", "Body bytes written (pending float text counted at its reserved "
                          "room, an upper bound).", WRITER_BYTES),
    WRITER_FIELD("buffered", "Bytes in the current buffer (pending float text at its reserved "
                             "room).", WRITER_BUFFERED),
    WRITER_FIELD("capacity", "Bytes allocated for the current buffer.", WRITER_CAPACITY),
    WRITER_FIELD("handovers", "Buffers handed over.", WRITER_HANDOVERS),
    WRITER_FIELD("buffer_size", "The threshold.", WRITER_BUFFER_SIZE),
    WRITER_FIELD("finished", "finish() was called.", WRITER_FINISHED),
    WRITER_FIELD("handover_interrupted",
                 "store() was interrupted (Ctrl-C) while it handed a full buffer over: the "
                 "buffer may not have reached the queue.",
                 WRITER_HANDOVER_INTERRUPTED),
    {"failure", (getter)Writer_get_failure, (setter)Writer_set_failure,
     "Why the body can no longer be completed (fail()), or None.", NULL},
    {"closed", (getter)Writer_get_closed, (setter)Writer_set_closed,
     "The producer side is closed: store() refuses (through on_failure).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Writer_slots[] = {
    {Py_tp_doc, "CommandWriter(buffer_size=1 << 20, *, queue=None, class_info=None, "
                "default=bulkwire.ENTITY, defer_float_text=False, on_failure=None)\n\nFrames bulk "
                "insert PUT commands into buffers of about buffer_size bytes. With queue and "
                "class_info (cls -> (id prefix, metadata defaults[, members the body leaves out])), "
                "store() applies the document conventions and hands full buffers over to queue. "
                "default is the walker's default hook (None, bulkwire.ENTITY or a callable). "
                "defer_float_text: documents' lists of floats are copied as doubles and their "
                "text is written when the handed-over buffer is first read (by the body pump, "
                "without the GIL), except after a hand-over that found the queue full, until "
                "one finds room. on_failure(writer, event): raises what store() raises for "
                "a failed writer (event 'failed'), a closed one ('closed') or a buffer the "
                "gone consumer never took ('lost'); records an interrupted hand-over "
                "('interrupted')."},
    {Py_tp_new, Writer_new},
    {Py_tp_dealloc, Writer_dealloc},
    {Py_tp_traverse, Writer_traverse},
    {Py_tp_clear, Writer_clear},
    {Py_tp_methods, Writer_methods},
    {Py_tp_getset, Writer_getset},
    {0, NULL},
};

static PyType_Spec Writer_spec = {
    .name = "bulkwire._core.CommandWriter",
    .basicsize = sizeof(WriterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Writer_slots,
};

int bw_command_writer_add_to_module(PyObject *module) {
    if (bw_bulk_commands_init() < 0)
        return -1;
    for (int i = 0; i < STORE_PARAMETERS; i++)
        if ((store_parameter_names[i] = PyUnicode_InternFromString(store_parameters[i])) == NULL)
            return -1;
    return bw_state_add_type(module, BW_TYPE_COMMAND_WRITER, &Writer_spec);
}
