/* ZstdStream: one zstd frame written piece by piece (zstd_stream.c), compressing with the GIL
   released; ZstdDecoder: its bounded decoder, for the loopback server. */
#include "py_zstd_stream.h"

#include "py_errors.h"
#include "py_fork_origin.h"
#include "py_state.h"
#include "py_stream_write.h"

static const char no_libzstd[] =
    "bulkwire was built without libzstd (install Debian's libzstd-dev and rebuild); "
    "the zstandard package compresses instead";

/* New reference. */
static PyObject *Zstd_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"level", "threads", NULL};
    int level = BW_ZSTD_LEVEL, threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$ii:ZstdStream", keywords, &level, &threads))
        return NULL;
    if (threads < 1 || threads > BW_ZSTD_THREADS_MAX) {
        PyErr_Format(PyExc_ValueError, "threads must be 1 to %d, not %d", BW_ZSTD_THREADS_MAX,
                     threads);
        return NULL;
    }
    if (!bw_zs_have_zstd()) {
        PyErr_SetString(PyExc_ValueError, no_libzstd);
        return NULL;
    }
    if (level < bw_zs_min_level() || level > bw_zs_max_level()) {
        PyErr_Format(PyExc_ValueError, "level must be in %d..%d, not %d", bw_zs_min_level(),
                     bw_zs_max_level(), level);
        return NULL;
    }
    bw_zstd_object *self = (bw_zstd_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->threads = threads;
    self->zs = bw_zs_new_parallel(level, threads);
    if (self->zs == NULL) {
        Py_DECREF(self);
        if (threads > 1) /* the likelier cause: a libzstd built without threads */
            return PyErr_Format(PyExc_ValueError, "threads=%d: this libzstd refused to run "
                                "workers (built without threads?), or out of memory", threads);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void Zstd_dealloc(bw_zstd_object *self) {
    PyObject_GC_UnTrack(self);
    bw_zs_free(self->zs);
    bw_heap_free((PyObject *)self);
}

/* What a ZstdStream's guard says (py_guard.h): a forked child's copy of a stream with
   workers, and a call while another thread compresses. */
static const bw_guard_words zstd_words = {
    .what = "this ZstdStream (on several threads)",
    .owned = "libzstd's worker threads",
    .in_use = "ZstdStream used from two threads at once",
};

PyObject *bw_zstd_set_error(bw_zs_result rc, const bw_zstd_stream *zs) {
    if (rc == BW_ZS_INHERITED) /* named as Python names it */
        return bw_raise_inherited(zstd_words.what, zstd_words.owned);
    bw_status st;
    bw_zs_status(rc, zs, &st);
    return bw_raise_status(&st);
}

int bw_is_zstd_stream(PyObject *obj) {
    return Py_TYPE(obj)->tp_dealloc == (destructor)Zstd_dealloc;
}

/* The core's write as the driver calls it. */
static int zstd_write_core(void *stream, const void *data, size_t n, int finish, bw_buf *out) {
    return (int)bw_zs_write(stream, data, n, finish, out);
}

PyObject *bw_zstd_write(bw_zstd_object *self, PyObject *data, int finish) {
    int failure; /* a copy is refused before the finished flag: it is not this process's */
    PyObject *piece = bw_stream_write(zstd_write_core, self->zs, &self->guard, &zstd_words,
                                      bw_zs_inherited(self->zs), &self->finished, "zstd", data,
                                      finish, &failure);
    if (failure != 0) {
        self->finished = 1; /* a failed stream cannot go on */
        return bw_zstd_set_error((bw_zs_result)failure, self->zs);
    }
    return piece;
}

/* compress(data) -> Piece | None. New reference. */
static PyObject *Zstd_compress(bw_zstd_object *self, PyObject *data) {
    return bw_zstd_write(self, data, 0);
}

/* finish(data=None) -> Piece. New reference. */
static PyObject *Zstd_finish(bw_zstd_object *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", NULL};
    PyObject *data = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:finish", keywords, &data))
        return NULL;
    return bw_zstd_write(self, data, 1);
}

/* New reference. */
static PyObject *Zstd_get_backend(bw_zstd_object *self, void *closure) {
    (void)self, (void)closure;
    return PyUnicode_FromString("zstd");
}

/* The getset closure of ZstdStream's byte counts. */
typedef enum { ZSTD_TOTAL_IN, ZSTD_TOTAL_OUT } zstd_total;

/* New reference. */
static PyObject *Zstd_get_total(bw_zstd_object *self, void *closure) {
    switch ((zstd_total)(intptr_t)closure) {
    case ZSTD_TOTAL_IN: return PyLong_FromSize_t(bw_zs_total_in(self->zs));
    case ZSTD_TOTAL_OUT: return PyLong_FromSize_t(bw_zs_total_out(self->zs));
    }
    Py_UNREACHABLE();
}

/* New reference. */
static PyObject *Zstd_get_finished(bw_zstd_object *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->finished);
}

static PyMethodDef Zstd_methods[] = {
    {"compress", (PyCFunction)Zstd_compress, METH_O,
     "compress(data) -> Piece | None\n\nCompress data and flush, with the GIL released. "
     "None for empty input (no empty pieces)."},
    {"finish", (PyCFunction)(void (*)(void))Zstd_finish, METH_VARARGS | METH_KEYWORDS,
     "finish(data=None) -> Piece\n\nCompress the last data and end the frame."},
    {NULL, NULL, 0, NULL},
};

/* New reference. */
static PyObject *Zstd_get_threads(bw_zstd_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->threads);
}

static PyGetSetDef Zstd_getset[] = {
    {"threads", (getter)Zstd_get_threads, NULL, "The threads compressing each piece at once.", NULL},
    {"backend", (getter)Zstd_get_backend, NULL, "'zstd'.", NULL},
    {"total_in", (getter)Zstd_get_total, NULL, "Bytes compressed so far.", (void *)ZSTD_TOTAL_IN},
    {"total_out", (getter)Zstd_get_total, NULL, "Bytes produced so far.", (void *)ZSTD_TOTAL_OUT},
    {"finished", (getter)Zstd_get_finished, NULL, "The frame was ended (finish()).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Zstd_slots[] = {
    {Py_tp_doc, "ZstdStream(*, level=ZSTD_LEVEL, threads=1)\n\nOne zstd frame (with a checksum) "
                "written piece by piece, each piece flushed so that it decodes on arrival. "
                "Negative levels keep Huffman-coded literals. threads > 1: libzstd's own "
                "workers compress each piece as 512 KiB jobs at once, still one frame. Needs "
                "libzstd (HAVE_ZSTD)."},
    {Py_tp_new, Zstd_new},
    {Py_tp_dealloc, Zstd_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, Zstd_methods},
    {Py_tp_getset, Zstd_getset},
    {0, NULL},
};

static PyType_Spec Zstd_spec = {
    .name = "bulkwire._core.ZstdStream",
    .basicsize = sizeof(bw_zstd_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Zstd_slots,
};

/* ---- the decoder ---- */

typedef struct {
    PyObject_HEAD
    bw_zstd_decoder *zd;
    bw_guard guard; /* busy: a thread is decoding (GIL released) */
} bw_zstd_decoder_object;

/* What a ZstdDecoder's guard says: a call while another thread decodes. */
static const bw_guard_words decoder_words = {
    .in_use = "ZstdDecoder used from two threads at once",
};

/* New reference. */
static PyObject *ZstdDecoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":ZstdDecoder", keywords))
        return NULL;
    if (!bw_zs_have_zstd()) {
        PyErr_SetString(PyExc_ValueError, no_libzstd);
        return NULL;
    }
    bw_zstd_decoder_object *self = (bw_zstd_decoder_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->zd = bw_zsd_new();
    if (self->zd == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void ZstdDecoder_dealloc(bw_zstd_decoder_object *self) {
    PyObject_GC_UnTrack(self);
    bw_zsd_free(self->zd);
    bw_heap_free((PyObject *)self);
}

/* read(data, max_length) -> (bytes, consumed, ended). New reference. ValueError for a
   corrupt frame; input after the end is left unconsumed. */
static PyObject *ZstdDecoder_read(bw_zstd_decoder_object *self, PyObject *args) {
    Py_buffer view = {0};
    Py_ssize_t max_length;
    if (!PyArg_ParseTuple(args, "y*n:read", &view, &max_length))
        return NULL;
    PyObject *out = NULL, *result = NULL;
    int entered = 0;
    if (max_length <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_length must be positive");
        goto cleanup;
    }
    if (bw_guard_enter(&self->guard, &decoder_words, 0, 0) < 0)
        goto cleanup;
    entered = 1;
    out = PyBytes_FromStringAndSize(NULL, max_length);
    if (out == NULL)
        goto cleanup;
    size_t consumed, produced;
    int ended;
    bw_zs_result rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bw_zsd_read(self->zd, view.buf, (size_t)view.len, &consumed, PyBytes_AS_STRING(out),
                     (size_t)max_length, &produced, &ended);
    Py_END_ALLOW_THREADS
    if (rc != BW_ZS_OK && rc != BW_ZS_AFTER_END) { /* after the end: consumed tells */
        bw_status st;
        bw_zsd_status(self->zd, &st);
        bw_raise_status(&st);
        goto cleanup;
    }
    if ((size_t)max_length != produced && _PyBytes_Resize(&out, (Py_ssize_t)produced) < 0)
        goto cleanup; /* out was freed and set to NULL */
    result = Py_BuildValue("(OnO)", out, (Py_ssize_t)consumed, ended ? Py_True : Py_False);
cleanup:
    if (entered)
        bw_guard_leave(&self->guard);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef ZstdDecoder_methods[] = {
    {"read", (PyCFunction)ZstdDecoder_read, METH_VARARGS,
     "read(data, max_length) -> (bytes, consumed, ended)\n\nDecode from data, giving at most "
     "max_length bytes (with the GIL released): consumed input bytes were taken; output may "
     "stay inside when max_length bytes came out (call again with b''). ended: the frame was "
     "decoded whole (input after its end is not consumed). ValueError for a corrupt frame."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot ZstdDecoder_slots[] = {
    {Py_tp_doc, "ZstdDecoder()\n\nThe decoder of one zstd frame, with a bound on each call's "
                "output (the loopback server's). Needs libzstd (HAVE_ZSTD)."},
    {Py_tp_new, ZstdDecoder_new},
    {Py_tp_dealloc, ZstdDecoder_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, ZstdDecoder_methods},
    {0, NULL},
};

static PyType_Spec ZstdDecoder_spec = {
    .name = "bulkwire._core.ZstdDecoder",
    .basicsize = sizeof(bw_zstd_decoder_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = ZstdDecoder_slots,
};

int bw_zstd_add_to_module(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_ZSTD_STREAM, &Zstd_spec) < 0 ||
        bw_state_add_type(module, BW_TYPE_ZSTD_DECODER, &ZstdDecoder_spec) < 0 ||
        PyModule_AddIntConstant(module, "HAVE_ZSTD", bw_zs_have_zstd()) < 0 ||
        PyModule_AddIntConstant(module, "ZSTD_LEVEL", BW_ZSTD_LEVEL) < 0)
        return -1;
    return 0;
}
