/* CommandWriter: the C half of a bulk insert's producer side. It applies the document
   conventions (py_conventions.c), frames each PUT command into its buffer (py_command_framing.c)
   and hands every full buffer over to its queue itself, so that a stored document's bytes
   go from the walker to the consumer without a trip through Python. BulkWriter (Python)
   wraps it with the body's lifecycle: failure, close, compression, consumers. */
#include "py_command_writer.h"

#include "py_bulk_commands.h"
#include "py_command_framing.h"
#include "py_piece.h"
#include "py_conventions.h"
#include "py_encode_batch.h"
#include "py_fork_origin.h"
#include "py_guard.h"
#include "py_state.h"
#include "py_handover_queue.h"

#include "buffer_pool.h"
#include "bulk_commands.h"
#include "int_text.h"

#include <stdatomic.h>
#include <string.h>

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

/* What the writer's guard says (py_guard.h). A writer belongs to the process that made it:
   in a forked child its queue's consumer (the parent's sender), the request and the
   connection are the parent's. It takes documents from one thread: checking only for
   overlapping calls caught a second thread at random (only when the GIL switched inside a
   call); the owner check refuses every call from another thread, before anything changes.
   A call while another is under way is refused by command_writer_refuse_reentry. */
static const bw_guard_words writer_words = {
    .what = "this BulkWriter (or BulkInsert)",
    .owned = "its body, its sender thread, its request and its connection",
    .other_thread = "a bulk insert takes documents from one thread only: this BulkWriter (or "
                    "BulkInsert) belongs to the thread that first stored into it, and this "
                    "call came from another thread; use one per producer thread",
};

/* The process check alone. 0, or -1 with RuntimeError set. */
static int command_writer_check_process(WriterObject *self) {
    return bw_check_origin(&self->origin, writer_words.what, writer_words.owned);
}

/* The process and the thread. 0, or -1 with RuntimeError set. */
static int command_writer_check_thread(WriterObject *self) {
    return bw_guard_check(&self->guard, &writer_words, 0, bw_origin_inherited(&self->origin));
}

/* RuntimeError for a call made while another call of the same writer is under way: from its
   own thread, so from inside it (a hook, a to_json, a __del__, a gc or weakref callback, a
   signal handler). -1. */
static int command_writer_refuse_reentry(WriterObject *self) {
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

/* The checks of every producer call, made before anything changes: the process, the thread,
   no other call under way (a call from inside one would write into the middle of its
   command). On success the call is under way (busy) until command_writer_leave. 0, or -1
   with RuntimeError set. */
static int command_writer_enter(WriterObject *self) {
    int rc = bw_guard_enter(&self->guard, &writer_words, 0, bw_origin_inherited(&self->origin));
    if (rc == BW_GUARD_BUSY)
        return command_writer_refuse_reentry(self);
    if (rc == 0 && self->held != NULL) {
        bw_guard_leave(&self->guard);
        return command_writer_refuse_reentry(self);
    }
    return rc;
}

static void command_writer_leave(WriterObject *self) { bw_guard_leave(&self->guard); }

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

/* New reference: the full buffer as a Piece, None when nothing is buffered. */
static PyObject *command_writer_take(WriterObject *self) {
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
   piece is not shared yet: nobody else settles it meanwhile. */
static void command_writer_settle_when_full(WriterObject *self, bw_piece_object *piece) {
    bw_hq *q = &self->queue->q;
    if (atomic_load_explicit(&piece->pending, memory_order_acquire) == BW_PIECE_SETTLED ||
        bw_hq_len(q) < bw_hq_capacity(q))
        return;
    Py_BEGIN_ALLOW_THREADS
    bw_piece_settle(piece);
    Py_END_ALLOW_THREADS
}

/* Hands the full buffer over to the queue, waiting for room with the GIL released. 1 handed
   over; 0 the consumer is gone (the buffer is dropped); -1 with an exception set, Ctrl-C or
   out of memory: handover_interrupted then says the body can no longer be trusted whole. */
static int command_writer_hand_over(WriterObject *self) {
    /* The reference is given to the queue: the moment the pump has sent the buffer, nothing
       else holds it and its memory goes back. A reference kept here until this thread got
       the GIL again could keep a sent buffer alive through the pump's next blocking send,
       one buffer over the memory bound. */
    PyObject *piece = command_writer_take(self);
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
        handed_over = command_writer_hand_over(self);
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
    return command_writer_take(self);
}

/* finish() -> Piece. New reference. Ends the array; returns what is left. */
static PyObject *finish_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args, (void)nargs;
    if (bw_command_writer_finish(&self->w) < 0)
        return NULL;
    return command_writer_take(self);
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
    int taken = command_writer_hand_over(sink->self);
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
    if (len > w->threshold && w->buf.len > 0 && (taken = command_writer_hand_over(self)) <= 0) {
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
    return bw_command_writer_over_threshold(w) ? command_writer_hand_over(self) : 1;
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
static PyObject *Writer_put_batch(WriterObject *self, PyObject *prepared) {
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

/* ---- counters, time series and attachments (bulk_commands.h frames them) ---- */

/* The checks of every command method after command_writer_enter. 0, or -1 with an exception
   set. */
static int command_writer_can_write(WriterObject *self) {
    if (self->queue == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this command needs a writer made with queue=");
        return -1;
    }
    if (self->w.finished) {
        PyErr_SetString(PyExc_RuntimeError, "the bulk insert body is already finished");
        return -1;
    }
    return 0;
}

/* New reference: True once the command is in the body and a full buffer (if any) was handed
   over; None when the consumer is gone (the buffer was dropped); NULL when the hand-over was
   interrupted (handover_interrupted). The official client's flush points: after each
   operation. */
static PyObject *command_writer_written(WriterObject *self) {
    int handed_over = 1;
    if (bw_command_writer_over_threshold(&self->w))
        handed_over = command_writer_hand_over(self);
    if (handed_over < 0)
        return NULL;
    return Py_NewRef(handed_over ? Py_True : Py_None);
}

/* New reference (see command_writer_written): an increment or entry was written from `start`
   as operation number in_batch + 1 of its command. */
static PyObject *command_writer_operation_written(WriterObject *self, size_t in_batch, size_t start) {
    self->w.in_batch = in_batch + 1;
    self->w.bytes += self->w.buf.len - start;
    return command_writer_written(self);
}

/* NULL (the exception is set): what a failed operation wrote from `start` is taken back. */
static PyObject *command_writer_undo(bw_command_writer *w, size_t start) {
    w->buf.len = start;
    return NULL;
}

/* Whether the counters command open for `open_id` takes increments of `id` too: the same id,
   compared as the official client compares it (lower-cased). 1, 0, or -1 with an exception. */
static int same_counters_document(PyObject *open_id, PyObject *id) {
    if (open_id == id)
        return 1;
    int equal = PyUnicode_Compare(open_id, id);
    if (equal == 0 || PyErr_Occurred())
        return equal == 0 ? 1 : -1;
    /* str.lower itself: a subclass's own lower() would run Python code in the middle */
    PyObject *a = PyObject_CallMethod((PyObject *)&PyUnicode_Type, "lower", "O", open_id);
    PyObject *b = a != NULL ? PyObject_CallMethod((PyObject *)&PyUnicode_Type, "lower", "O", id)
                            : NULL;
    int same = b != NULL ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return same;
}

/* increment(id, name, delta) -> True | None (a new reference; see command_writer_written). */
static PyObject *increment_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "increment() takes 3 arguments (id, name, delta), %zd given",
                     nargs);
        return NULL;
    }
    if (command_writer_can_write(self) < 0)
        return NULL;
    PyObject *id = args[0];
    Py_ssize_t id_len, name_len;
    int64_t delta;
    const char *id_text = bw_command_text(id, "id", &id_len);
    if (id_text == NULL)
        return NULL;
    const char *name_text = bw_command_text(args[1], "name", &name_len);
    if (name_text == NULL || bw_counter_delta(args[2], &delta) < 0 ||
        bw_command_writer_check_no_series(&self->w) < 0)
        return NULL;
    bw_command_writer *w = &self->w;
    int same = w->open == BW_OPEN_COUNTERS ? same_counters_document(self->counters_id, id) : 0;
    if (same < 0 || bw_command_writer_ensure_buffer(w) < 0)
        return NULL;
    size_t start = w->buf.len, in_batch = w->in_batch;
    if (!same) {
        if (bw_command_writer_begin_command(w) < 0)
            return NULL;
        if (bw_counters_open(&w->buf, id_text, (size_t)id_len) < 0)
            goto nomem;
        in_batch = 0;
    } else if (in_batch >= BW_COMMAND_BATCH_MAX) {
        Py_ssize_t open_len;
        const char *open_text = PyUnicode_AsUTF8AndSize(self->counters_id, &open_len);
        if (open_text == NULL)
            goto error;
        if (BW_BUF_APPEND_LITERAL(&w->buf, "]}},") < 0 ||
            bw_counters_open(&w->buf, open_text, (size_t)open_len) < 0)
            goto nomem;
        in_batch = 0;
    }
    if (bw_counter_increment(&w->buf, in_batch > 0, name_text, (size_t)name_len, delta) < 0)
        goto nomem;
    if (!same) {
        bw_command_writer_command_done(w);
        w->open = BW_OPEN_COUNTERS;
        Py_XSETREF(self->counters_id, Py_NewRef(id));
    }
    return command_writer_operation_written(self, in_batch, start);
nomem:
    PyErr_NoMemory();
error:
    return command_writer_undo(w, start);
}

/* series_begin(id, name) -> True (a new reference). The time series opens; nothing is written
   before its first entry, but an open counters command is closed now, as the official client
   closes it. */
static PyObject *series_begin_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "series_begin() takes 2 arguments (id, name), %zd given", nargs);
        return NULL;
    }
    if (command_writer_can_write(self) < 0)
        return NULL;
    Py_ssize_t len;
    if (bw_command_text(args[0], "id", &len) == NULL || bw_command_text(args[1], "name", &len) == NULL)
        return NULL;
    bw_command_writer *w = &self->w;
    if (w->open == BW_OPEN_SERIES) {
        PyErr_SetString(PyExc_RuntimeError, "a time series of this bulk insert is already open: "
                                            "close it (leave its with block) first");
        return NULL;
    }
    if (w->open == BW_OPEN_COUNTERS) {
        if (bw_command_writer_ensure_buffer(w) < 0)
            return NULL;
        if (bw_command_batch_close(&w->buf) < 0)
            return PyErr_NoMemory();
        w->bytes += 3;
    }
    w->open = BW_OPEN_SERIES;
    w->open_written = 0;
    w->in_batch = 0;
    Py_XSETREF(self->series_id, Py_NewRef(args[0]));
    Py_XSETREF(self->series_name, Py_NewRef(args[1]));
    Py_RETURN_TRUE;
}

/* series_append(timestamp, values, tag) -> True | None (a new reference; see
   command_writer_written): one entry of the open time series. */
static PyObject *series_append_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "series_append() takes 3 arguments (timestamp, values, tag), "
                                      "%zd given", nargs);
        return NULL;
    }
    if (command_writer_can_write(self) < 0)
        return NULL;
    bw_command_writer *w = &self->w;
    if (w->open != BW_OPEN_SERIES) {
        PyErr_SetString(PyExc_RuntimeError, "no time series is open");
        return NULL;
    }
    PyObject *values = args[1], *tag = args[2];
    int64_t unix_ms;
    Py_ssize_t tag_len = 0, id_len, name_len;
    const char *tag_text = NULL;
    /* a tzinfo's utcoffset() is Python code: a call back into this writer from it is refused */
    int converted = bw_timestamp_unix_ms(args[0], &unix_ms);
    if (converted < 0)
        return NULL;
    if (!PyList_Check(values) && !PyTuple_Check(values)) {
        PyErr_Format(PyExc_TypeError, "values must be a list or tuple, not %.100s",
                     Py_TYPE(values)->tp_name);
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(values) == 0) {
        PyErr_SetString(PyExc_ValueError, "values must hold at least one value");
        return NULL;
    }
    if (tag != Py_None && (tag_text = bw_command_text(tag, "tag", &tag_len)) == NULL)
        return NULL;
    const char *id_text = PyUnicode_AsUTF8AndSize(self->series_id, &id_len);
    const char *name_text = id_text != NULL ? PyUnicode_AsUTF8AndSize(self->series_name, &name_len)
                                            : NULL;
    if (name_text == NULL || bw_command_writer_ensure_buffer(w) < 0)
        return NULL;
    size_t start = w->buf.len, in_batch = w->in_batch;
    if (!w->open_written || in_batch >= BW_COMMAND_BATCH_MAX) {
        int rc = !w->open_written ? bw_buf_append(&w->buf, w->started ? "," : "[", 1)
                                  : BW_BUF_APPEND_LITERAL(&w->buf, "]}},");
        if (rc < 0 || bw_time_series_open(&w->buf, id_text, (size_t)id_len, name_text,
                                          (size_t)name_len) < 0)
            goto nomem;
        in_batch = 0;
    }
    if (bw_time_series_entry_open(&w->buf, in_batch > 0, unix_ms,
                                  (size_t)PySequence_Fast_GET_SIZE(values)) < 0)
        goto nomem;
    if (bw_series_values(&w->buf, values) < 0)
        goto error;
    if (bw_time_series_entry_close(&w->buf, tag_text, (size_t)tag_len) < 0)
        goto nomem;
    w->started = 1;
    w->open_written = 1;
    return command_writer_operation_written(self, in_batch, start);
nomem:
    PyErr_NoMemory();
error:
    return command_writer_undo(w, start);
}

/* series_end() -> None (a new reference): closes the open time series' command, if any. */
static PyObject *series_end_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args, (void)nargs;
    bw_command_writer *w = &self->w;
    if (w->open != BW_OPEN_SERIES)
        Py_RETURN_NONE;
    if (w->open_written) {
        if (bw_command_writer_ensure_buffer(w) < 0)
            return NULL;
        if (bw_command_batch_close(&w->buf) < 0)
            return PyErr_NoMemory();
        w->bytes += 3;
    }
    w->open = BW_OPEN_NONE;
    w->open_written = 0;
    Py_CLEAR(self->series_id);
    Py_CLEAR(self->series_name);
    Py_RETURN_NONE;
}

/* Hands `item` (a buffer-protocol object of the caller's) over to the queue as a piece of the
   body of its own. As command_writer_hand_over: 1, 0 or -1. */
static int command_writer_hand_over_item(WriterObject *self, PyObject *item) {
    int taken = bw_queue_put_steal(self->queue, Py_NewRef(item));
    if (taken > 0 && PyErr_CheckSignals() < 0)
        taken = -1;
    if (taken < 0)
        self->handover_interrupted = 1;
    return taken;
}

/* 1 when the bytes of `data` cannot change: a bytes object, or a read-only view of one. */
static int is_immutable(PyObject *data) {
    if (PyBytes_CheckExact(data))
        return 1;
    if (!PyMemoryView_Check(data))
        return 0;
    const Py_buffer *view = PyMemoryView_GET_BUFFER(data);
    PyObject *base = PyMemoryView_GET_BASE(data);
    return view->readonly && base != NULL && PyBytes_CheckExact(base) &&
           PyBuffer_IsContiguous(view, 'C');
}

/* The one size-threshold slicer of bytes the body carries as they are (store_encoded's
   pieces, an attachment's bytes). Immutable data (is_immutable) of at least the threshold
   goes out without a copy, after the current buffer: whole below twice the threshold, else
   in views of `threshold` bytes (the last one up to twice that). Anything else is copied: at
   once when smaller than the threshold (as the official client writes an attachment),
   otherwise in parts that fill each buffer just past the threshold, so memory stays bounded.
   1, 0 (the consumer is gone) or -1 with an exception set; on -1 the body is incomplete
   (handover_interrupted). */
static int command_writer_put_slices(WriterObject *self, PyObject *data, const Py_buffer *view) {
    bw_command_writer *w = &self->w;
    const char *bytes = view->buf;
    size_t remaining = (size_t)view->len, threshold = w->threshold;
    int taken = 1;
    if (remaining >= threshold && is_immutable(data)) {
        if (w->buf.len > 0 && (taken = command_writer_hand_over(self)) <= 0)
            return taken;
        w->bytes += remaining;
        if (remaining < 2 * threshold)
            return command_writer_hand_over_item(self, data);
        PyObject *whole = PyMemoryView_FromObject(data);
        if (whole == NULL)
            goto failed;
        for (size_t offset = 0; taken > 0 && offset < remaining;) {
            size_t size = remaining - offset >= 2 * threshold ? threshold : remaining - offset;
            PyObject *part = PySequence_GetSlice(whole, (Py_ssize_t)offset, (Py_ssize_t)(offset + size));
            if (part == NULL) {
                Py_DECREF(whole);
                goto failed;
            }
            taken = command_writer_hand_over_item(self, part);
            Py_DECREF(part);
            offset += size;
        }
        Py_DECREF(whole);
        return taken;
    }
    while (remaining > 0) {
        if (bw_command_writer_ensure_buffer(w) < 0)
            goto failed;
        size_t part = remaining;
        if (remaining >= threshold) {
            size_t room = w->buf.len < threshold ? threshold - w->buf.len + 1 : 1;
            part = room < remaining ? room : remaining;
        }
        if (bw_buf_append(&w->buf, bytes, part) < 0) {
            PyErr_NoMemory();
            goto failed;
        }
        bytes += part;
        remaining -= part;
        w->bytes += part;
        if (bw_command_writer_over_threshold(w) && (taken = command_writer_hand_over(self)) <= 0)
            return taken;
    }
    return 1;
failed:
    self->handover_interrupted = 1;
    return -1;
}

/* put_pieces(pieces, count) -> True | None (a new reference; see command_writer_written):
   commands already encoded (BulkWriter.store_encoded checked them: a list of non-empty
   bytes-like pieces whose concatenation is complete commands joined by ','), after the
   separator, through the slicer (command_writer_put_slices). Once the separator is written
   the body holds part of them: a failure then sets handover_interrupted. */
static PyObject *put_pieces_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "put_pieces() takes a list of pieces and a count");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if ((count == -1 && PyErr_Occurred()) || command_writer_can_write(self) < 0)
        return NULL;
    PyObject *pieces = Py_NewRef(args[0]), *result = NULL;
    if (bw_command_writer_begin_encoded(&self->w, count) < 0)
        goto done;
    int taken = 1;
    for (Py_ssize_t i = 0; taken > 0 && i < PyList_GET_SIZE(pieces); i++) {
        PyObject *piece = Py_NewRef(PyList_GET_ITEM(pieces, i));
        Py_buffer view;
        if (PyObject_GetBuffer(piece, &view, PyBUF_SIMPLE) < 0) {
            self->handover_interrupted = 1;
            taken = -1;
        } else {
            taken = command_writer_put_slices(self, piece, &view);
            PyBuffer_Release(&view);
        }
        Py_DECREF(piece);
    }
    if (taken > 0)
        result = command_writer_written(self);
    else if (taken == 0)
        result = Py_NewRef(Py_None);
done:
    Py_DECREF(pieces);
    return result;
}

/* attachment(id, name, data, content_type) -> True | None (a new reference; see
   command_writer_written): the AttachmentPUT command, then data's raw bytes. */
static PyObject *attachment_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "attachment() takes 4 arguments (id, name, data, "
                                      "content_type), %zd given", nargs);
        return NULL;
    }
    if (command_writer_can_write(self) < 0)
        return NULL;
    PyObject *data = args[2], *content_type = args[3], *result = NULL;
    Py_ssize_t id_len, name_len, type_len = 0;
    const char *type_text = NULL;
    const char *id_text = bw_command_text(args[0], "id", &id_len);
    const char *name_text = id_text != NULL ? bw_command_text(args[1], "name", &name_len) : NULL;
    if (name_text == NULL)
        return NULL;
    if (content_type != Py_None &&
        (type_text = bw_command_text(content_type, "content_type", &type_len)) == NULL)
        return NULL;
    if (PyUnicode_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "attachment_bytes must be a bytes-like object, not str "
                                         "(encode it)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "attachment_bytes must be a bytes-like object, not "
                                          "%.100s", Py_TYPE(data)->tp_name);
        }
        return NULL;
    }
    bw_command_writer *w = &self->w;
    size_t before = 0;
    int taken = -1;
    if (bw_command_writer_ensure_buffer(w) < 0)
        goto cleanup;
    before = w->buf.len;
    if (bw_command_writer_begin_command(w) < 0)
        goto cleanup;
    if (bw_attachment_header(&w->buf, id_text, (size_t)id_len, name_text, (size_t)name_len,
                             type_text, (size_t)type_len, (uint64_t)view.len) < 0) {
        w->buf.len = before;
        PyErr_NoMemory();
        goto cleanup;
    }
    w->bytes += w->buf.len - before;
    bw_command_writer_command_done(w);
    taken = 1;
    if (bw_command_writer_over_threshold(w))
        taken = command_writer_hand_over(self);
    if (taken > 0)
        taken = command_writer_put_slices(self, data, &view);
    if (taken >= 0)
        result = Py_NewRef(taken ? Py_True : Py_None);
cleanup:
    PyBuffer_Release(&view);
    return result;
}

/* ---- the methods: each producer call is under way from its checks to its end ---- */

/* A producer call's body, run after command_writer_enter: a new reference, or NULL with an
   exception set. */
typedef PyObject *(*writer_call)(WriterObject *self, PyObject *const *args, Py_ssize_t nargs);

/* New reference: call, under command_writer_enter's checks. */
static PyObject *command_writer_run(WriterObject *self, writer_call call, PyObject *const *args,
                                    Py_ssize_t nargs) {
    if (command_writer_enter(self) < 0)
        return NULL;
    PyObject *result = call(self, args, nargs);
    command_writer_leave(self);
    return result;
}

/* The methods whose body is a *_call function: Writer_<name>, run under
   command_writer_run; each returns a new reference (see its *_call). */
#define WRITER_FASTCALL(name)                                                               \
    static PyObject *Writer_##name(WriterObject *self, PyObject *const *args,             \
                                   Py_ssize_t nargs) {                                     \
        return command_writer_run(self, name##_call, args, nargs);                         \
    }
#define WRITER_NOARGS(name)                                                                 \
    static PyObject *Writer_##name(WriterObject *self, PyObject *unused) {                 \
        (void)unused;                                                                      \
        return command_writer_run(self, name##_call, NULL, 0);                             \
    }
WRITER_FASTCALL(put)
WRITER_NOARGS(finish)
WRITER_FASTCALL(increment)
WRITER_FASTCALL(series_begin)
WRITER_FASTCALL(series_append)
WRITER_NOARGS(series_end)
WRITER_FASTCALL(attachment)
WRITER_FASTCALL(put_pieces)
#undef WRITER_FASTCALL
#undef WRITER_NOARGS

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

/* fail(error) -> None (a new reference): the body can no longer be completed: error is kept
   as the writer's failure (the first one stays) and the queue's consumer side is closed
   (waiting buffers are dropped, the next hand-over finds the consumer gone). RuntimeError in
   a forked child. */
static PyObject *Writer_fail(WriterObject *self, PyObject *error) {
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
static PyObject *Writer_hold(WriterObject *self, PyObject *what) {
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
static PyObject *Writer_release(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_check_thread(self) < 0)
        return NULL;
    Py_CLEAR(self->held);
    Py_RETURN_NONE;
}

/* claim() -> None (a new reference): the calling thread becomes the producer; RuntimeError
   (nothing changes) in a forked child, from another thread, or while a call of this writer
   is under way (from inside it). */
static PyObject *Writer_claim(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_enter(self) < 0)
        return NULL;
    command_writer_leave(self);
    Py_RETURN_NONE;
}

/* check_process() -> None (a new reference): RuntimeError in a forked child of the process
   that made the writer (from any thread). */
static PyObject *Writer_check_process(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (command_writer_check_process(self) < 0)
        return NULL;
    Py_RETURN_NONE;
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
    {"put", (PyCFunction)(void (*)(void))Writer_put, METH_FASTCALL,
     "put(id, entity, metadata) -> Piece | None\n\nAppend one PUT command as given; returns the "
     "buffer when it went over the threshold (the writer starts a new one). On error nothing "
     "of the command stays in the buffer."},
    {"finish", (PyCFunction)Writer_finish, METH_NOARGS,
     "finish() -> Piece\n\nEnd the array and return the last buffer."},
    {"put_pieces", (PyCFunction)(void (*)(void))Writer_put_pieces, METH_FASTCALL,
     "put_pieces(pieces, count) -> True | None\n\nAppend count commands already encoded (a list "
     "of non-empty bytes-like pieces whose concatenation is complete commands joined by ','; "
     "trusted) after the separator ('[' or ','). Immutable pieces (bytes) of at least the "
     "threshold are handed over without a copy, in slices of about the threshold when longer "
     "than twice that; the rest is copied. Returns True; None when the consumer is gone."},
    {"put_batch", (PyCFunction)Writer_put_batch, METH_O,
     "put_batch(prepared) -> int | None\n\nAppend one PUT command per row of a PreparedBatch "
     "(prepare_batch validated every row), encoded as encode_batch encodes them, straight into "
     "the writer's buffers (GIL released), each handed over to the queue once it holds more "
     "than the threshold; the separator ('[' or ',') goes into the same buffer. Returns the "
     "rows; None when the consumer is gone."},
    {"increment", (PyCFunction)(void (*)(void))Writer_increment, METH_FASTCALL,
     "increment(id, name, delta) -> True | None\n\nAppend a counter increment: to the open "
     "counters command of the same document, else in a new one (at most 1024 per command). "
     "Returns True; None when a full buffer could not be handed over (the consumer is gone)."},
    {"series_begin", (PyCFunction)(void (*)(void))Writer_series_begin, METH_FASTCALL,
     "series_begin(id, name) -> True\n\nOpen a time series: until series_end() the writer "
     "takes only its entries."},
    {"series_append", (PyCFunction)(void (*)(void))Writer_series_append, METH_FASTCALL,
     "series_append(timestamp, values, tag) -> True | None\n\nAppend one entry to the open "
     "time series (at most 1024 per command)."},
    {"series_end", (PyCFunction)Writer_series_end, METH_NOARGS,
     "series_end() -> None\n\nClose the open time series."},
    {"attachment", (PyCFunction)(void (*)(void))Writer_attachment, METH_FASTCALL,
     "attachment(id, name, data, content_type) -> True | None\n\nAppend an AttachmentPUT "
     "command and data's raw bytes after it."},
    {"fail", (PyCFunction)Writer_fail, METH_O,
     "fail(error) -> None\n\nThe body can no longer be completed: keep error as the failure "
     "(the first one stays) and close the queue's consumer side."},
    {"hold", (PyCFunction)Writer_hold, METH_O,
     "hold(what) -> None\n\nA producer call made of several Python steps (what names it) is "
     "under way: until release(), every producer call raises RuntimeError."},
    {"release", (PyCFunction)Writer_release, METH_NOARGS,
     "release() -> None\n\nThe call that held the writer is over."},
    {"claim", (PyCFunction)Writer_claim, METH_NOARGS,
     "claim() -> None\n\nMake the calling thread the writer's producer, or raise RuntimeError, "
     "changing nothing, when another thread already is (the first thread to call a store "
     "method owns it), while a call of this writer is under way (from inside it), or in a "
     "forked child."},
    {"check_process", (PyCFunction)Writer_check_process, METH_NOARGS,
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
                "without the GIL). on_failure(writer, event): raises what store() raises for "
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
