/* GzipStream: one gzip member written piece by piece (gzip_stream.c), deflating with the
   GIL released. */
#include "py_gzip_stream.h"

#include "py_errors.h"
#include "py_fork_origin.h"
#include "py_state.h"
#include "py_stream_write.h"

#include <string.h>

/* New reference. */
static PyObject *Gzip_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"backend", "threads", NULL};
    const char *name = "auto";
    int threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$si:GzipStream", keywords, &name, &threads))
        return NULL;
    if (threads < 1 || threads > BW_GZ_THREADS_MAX) {
        PyErr_Format(PyExc_ValueError, "threads must be 1 to %d, not %d", BW_GZ_THREADS_MAX,
                     threads);
        return NULL;
    }
    bw_gz_backend backend;
    if (strcmp(name, "auto") == 0) {
        backend = bw_gz_have_isal() ? BW_GZ_ISAL : BW_GZ_ZLIB;
    } else if (strcmp(name, "zlib") == 0) {
        backend = BW_GZ_ZLIB;
    } else if (strcmp(name, "isal") == 0) {
        if (!bw_gz_have_isal()) {
            PyErr_SetString(PyExc_ValueError,
                            "backend 'isal' is not available: bulkwire was built without "
                            "libisal (install Debian's libisal-dev and rebuild)");
            return NULL;
        }
        backend = BW_GZ_ISAL;
    } else {
        PyErr_Format(PyExc_ValueError, "backend must be 'auto', 'zlib' or 'isal', not '%s'", name);
        return NULL;
    }
    bw_gzip_object *self = (bw_gzip_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->backend = backend;
    /* one thread: the serial stream, whose bytes are zlib's/igzip's own */
    self->gz = threads > 1 ? bw_gz_new_parallel(backend, threads) : bw_gz_new(backend);
    if (self->gz == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void Gzip_dealloc(bw_gzip_object *self) {
    PyObject_GC_UnTrack(self);
    bw_gz_free(self->gz);
    bw_heap_free((PyObject *)self);
}

int bw_is_gzip_stream(PyObject *obj) {
    return Py_TYPE(obj)->tp_dealloc == (destructor)Gzip_dealloc;
}

/* The core's write as the driver calls it. */
static int gzip_write_core(void *stream, const void *data, size_t n, int finish, bw_buf *out) {
    return (int)bw_gz_write(stream, data, n, finish, out);
}

/* What a GzipStream's guard says (py_guard.h): a forked child's copy of a parallel stream,
   and a call while another thread deflates. */
static const bw_guard_words gzip_words = {
    .what = "this GzipStream (on several threads)",
    .owned = "its compression threads and their lock",
    .in_use = "GzipStream used from two threads at once",
};

PyObject *bw_gzip_raise_inherited(void) {
    return bw_raise_inherited(gzip_words.what, gzip_words.owned);
}

PyObject *bw_gzip_write(bw_gzip_object *self, PyObject *data, int finish) {
    int failure;
    PyObject *piece = bw_stream_write(gzip_write_core, self->gz, &self->guard, &gzip_words,
                                      bw_gz_inherited(self->gz), &self->finished, "gzip", data,
                                      finish, &failure);
    if (failure != 0) {
        bw_status st;
        bw_gz_status((bw_gz_result)failure, &st);
        Py_XDECREF(piece);
        return bw_raise_status(&st);
    }
    return piece;
}

/* compress(data) -> Piece | None. New reference. */
static PyObject *Gzip_compress(bw_gzip_object *self, PyObject *data) {
    return bw_gzip_write(self, data, 0);
}

/* finish(data=None) -> Piece. New reference. */
static PyObject *Gzip_finish(bw_gzip_object *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", NULL};
    PyObject *data = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:finish", keywords, &data))
        return NULL;
    return bw_gzip_write(self, data, 1);
}

/* New reference. */
static PyObject *Gzip_get_backend(bw_gzip_object *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(self->backend == BW_GZ_ISAL ? "isal" : "zlib");
}

/* The getset closure of GzipStream's byte counts. */
typedef enum { GZIP_TOTAL_IN, GZIP_TOTAL_OUT, GZIP_COMMA_BLOCKS } gzip_total;

/* New reference. */
static PyObject *Gzip_get_total(bw_gzip_object *self, void *closure) {
    switch ((gzip_total)(intptr_t)closure) {
    case GZIP_TOTAL_IN: return PyLong_FromSize_t(bw_gz_total_in(self->gz));
    case GZIP_TOTAL_OUT: return PyLong_FromSize_t(bw_gz_total_out(self->gz));
    case GZIP_COMMA_BLOCKS: return PyLong_FromSize_t(bw_gz_comma_blocks(self->gz));
    }
    Py_UNREACHABLE();
}

/* New reference. */
static PyObject *Gzip_get_threads(bw_gzip_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(bw_gz_threads(self->gz));
}

/* New reference. */
static PyObject *Gzip_get_finished(bw_gzip_object *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->finished);
}

static PyMethodDef Gzip_methods[] = {
    {"compress", (PyCFunction)Gzip_compress, METH_O,
     "compress(data) -> Piece | None\n\nDeflate data and sync-flush, with the GIL released. "
     "None for empty input (no empty pieces)."},
    {"finish", (PyCFunction)(void (*)(void))Gzip_finish, METH_VARARGS | METH_KEYWORDS,
     "finish(data=None) -> Piece\n\nDeflate the last data and end the gzip member."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Gzip_getset[] = {
    {"backend", (getter)Gzip_get_backend, NULL, "'zlib' or 'isal'.", NULL},
    {"total_in", (getter)Gzip_get_total, NULL, "Bytes compressed so far.", (void *)GZIP_TOTAL_IN},
    {"total_out", (getter)Gzip_get_total, NULL, "Bytes produced so far.", (void *)GZIP_TOTAL_OUT},
    {"comma_blocks", (getter)Gzip_get_total, NULL,
     "Blocks coded by the comma coder: literals, and a back-reference wherever the text after "
     "a comma repeats the text after the comma before it (chosen where a sampled block shows "
     "that general matching finds little more, as in float arrays). 0 with threads=1.",
     (void *)GZIP_COMMA_BLOCKS},
    {"finished", (getter)Gzip_get_finished, NULL, "The member was ended (finish()).", NULL},
    {"threads", (getter)Gzip_get_threads, NULL, "The threads deflating each piece at once.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Gzip_slots[] = {
    {Py_tp_doc, "GzipStream(*, backend='auto', threads=1)\n\nOne gzip member at the fastest level, "
                "written piece by piece, each piece sync-flushed. backend: 'auto', 'zlib' or "
                "'isal'. threads > 1: each piece is cut into blocks deflated at once on that "
                "many threads (each primed with the 32 KiB before it), still one member."},
    {Py_tp_new, Gzip_new},
    {Py_tp_dealloc, Gzip_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, Gzip_methods},
    {Py_tp_getset, Gzip_getset},
    {0, NULL},
};

static PyType_Spec Gzip_spec = {
    .name = "bulkwire._core.GzipStream",
    .basicsize = sizeof(bw_gzip_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Gzip_slots,
};

int bw_gzip_add_to_module(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_GZIP_STREAM, &Gzip_spec) < 0 ||
        PyModule_AddIntConstant(module, "GZIP_THREADS_MAX", BW_GZ_THREADS_MAX) < 0 ||
        PyModule_AddIntConstant(module, "HAVE_ISAL", bw_gz_have_isal()) < 0)
        return -1;
    return 0;
}
