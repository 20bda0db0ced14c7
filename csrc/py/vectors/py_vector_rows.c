/* Helpers the vector encode and decode paths share (declared in py_vector_codec.h). */
#include "py_vector_codec.h"

#include "py_state.h"

/* The many-row calls report which row failed, as the driver's loops do, by rewriting the
   row's own message rather than wrapping the exception: callers (and the tests that compare
   with the Scylla driver) match on the exception's type and text. */
void bw_vec_prefix_row(Py_ssize_t row, int any_conversion_error) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == PyExc_ValueError ||
        (any_conversion_error && (type == PyExc_TypeError || type == PyExc_OverflowError))) {
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *msg = value ? PyObject_Str(value) : NULL; /* new reference */
        if (msg != NULL) {
            PyErr_Format(type, "row %zd: %U", row, msg);
            Py_DECREF(msg);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return;
        }
        PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
}

/* ---- VectorRows: the rows of serialize_rows, one contiguous read-only buffer ---- */

typedef struct {
    PyObject_HEAD
    const bw_subtype *st; /* what the rows were written as: the drop-in matches on it */
    Py_ssize_t dim;
    Py_ssize_t stride;    /* bytes of one row */
    Py_ssize_t count;
    Py_ssize_t exporting_row; /* >= 0 only inside VectorRows_item: the next export is that row */
    PyObject *storage;    /* private bytearray, never resized nor handed out: its memory stays
                             put while any exported view lives */
} VectorRowsObject;

PyObject *bw_vec_rows_adopt(bw_vector_codec *c, PyObject *bytearray) {
    PyTypeObject *type = bw_state_type(BW_TYPE_VECTOR_ROWS); /* borrowed */
    VectorRowsObject *rows =
        type != NULL ? (VectorRowsObject *)type->tp_alloc(type, 0) : NULL; /* new reference */
    if (rows == NULL) {
        Py_DECREF(bytearray);
        return NULL;
    }
    rows->st = c->st;
    rows->dim = c->dim;
    rows->stride = c->row_size;
    rows->count = PyByteArray_GET_SIZE(bytearray) / c->row_size;
    rows->exporting_row = -1;
    rows->storage = bytearray;
    return (PyObject *)rows;
}

static void VectorRows_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    Py_DECREF(((VectorRowsObject *)self)->storage);
    bw_heap_free(self);
}

/* The references it holds: its type and its bytearray (which refers to nothing). */
static int VectorRows_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((VectorRowsObject *)self)->storage);
    return 0;
}

static Py_ssize_t VectorRows_length(PyObject *self) { return ((VectorRowsObject *)self)->count; }

/* New reference: row i as a read-only memoryview of the rows' own memory (no copy); its .obj
   is the VectorRows, which is how bulkwire.cql recognises it. */
static PyObject *VectorRows_item(PyObject *self, Py_ssize_t i) {
    VectorRowsObject *rows = (VectorRowsObject *)self;
    if (i < 0 || i >= rows->count) {
        PyErr_SetString(PyExc_IndexError, "VectorRows index out of range");
        return NULL;
    }
    /* The row is exported on its own rather than sliced from a view of the whole: one
       memoryview per row instead of two plus a slice, a third of the cost. No Python code
       runs between setting the row and the export (PyMemoryView_FromObject calls the slot
       below directly, GIL held). */
    rows->exporting_row = i;
    PyObject *row = PyMemoryView_FromObject(self); /* new reference */
    rows->exporting_row = -1;
    return row;
}

static int VectorRows_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    VectorRowsObject *rows = (VectorRowsObject *)self;
    char *data = PyByteArray_AS_STRING(rows->storage);
    Py_ssize_t len = PyByteArray_GET_SIZE(rows->storage);
    if (rows->exporting_row >= 0) {
        data += rows->exporting_row * rows->stride;
        len = rows->stride;
    }
    return PyBuffer_FillInfo(view, self, data, len, 1, flags);
}

/* New reference. */
static PyObject *VectorRows_repr(PyObject *self) {
    VectorRowsObject *rows = (VectorRowsObject *)self;
    return PyUnicode_FromFormat("<VectorRows: %zd rows of vector<%s, %zd>, %zd bytes each>",
                                rows->count, rows->st->name, rows->dim, rows->stride);
}

/* Getters: each a new reference. */
static PyObject *VectorRows_get_stride(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(((VectorRowsObject *)self)->stride);
}
static PyObject *VectorRows_get_subtype(PyObject *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(((VectorRowsObject *)self)->st->name);
}
static PyObject *VectorRows_get_dimension(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(((VectorRowsObject *)self)->dim);
}

static PyGetSetDef VectorRows_getset[] = {
    {"stride", VectorRows_get_stride, NULL, "Bytes of one row; row i is at i * stride.", NULL},
    {"subtype", VectorRows_get_subtype, NULL, "CQL subtype the rows were written as.", NULL},
    {"dimension", VectorRows_get_dimension, NULL, "Elements per row.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot VectorRows_slots[] = {
    {Py_tp_doc, "The rows VectorCodec.serialize_rows wrote, back to back in one read-only "
                "buffer: rows[i] is a memoryview of row i (no copy); the object itself exports "
                "the whole buffer. bulkwire.cql passes its rows to the driver as they are."},
    {Py_tp_dealloc, VectorRows_dealloc},
    {Py_tp_traverse, VectorRows_traverse},
    {Py_tp_repr, VectorRows_repr},
    {Py_sq_length, VectorRows_length},
    {Py_sq_item, VectorRows_item},
    {Py_bf_getbuffer, VectorRows_getbuffer},
    {Py_tp_getset, VectorRows_getset},
    {0, NULL},
};

/* Made by VectorCodec.serialize_rows only: the type cannot be called. */
static PyType_Spec VectorRows_spec = {
    .name = "bulkwire._core.VectorRows",
    .basicsize = sizeof(VectorRowsObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = VectorRows_slots,
};

PyObject *bw_vec_rows_ready_row(bw_vector_codec *c, PyObject *v) {
    if (!PyMemoryView_Check(v))
        return NULL;
    /* a released memoryview refuses new exports; its buffer fields must not be read then */
    Py_buffer probe;
    if (PyObject_GetBuffer(v, &probe, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return NULL;
    }
    PyBuffer_Release(&probe);
    const Py_buffer *view = PyMemoryView_GET_BUFFER(v);
    /* VectorRows (not a subclass: it has none), known by its deallocator without a lookup */
    if (view->obj == NULL || Py_TYPE(view->obj)->tp_dealloc != VectorRows_dealloc)
        return NULL;
    const VectorRowsObject *rows = (const VectorRowsObject *)view->obj;
    /* exactly one whole row as plain bytes: a cast or an offset slice would send other bytes
       (or another length) than the row */
    if (rows->st != c->st || rows->dim != c->dim || view->len != rows->stride ||
        view->itemsize != 1 || view->ndim != 1 || view->strides == NULL ||
        view->strides[0] != 1 || view->format == NULL || strcmp(view->format, "B") != 0)
        return NULL;
    Py_ssize_t offset = (const char *)view->buf - PyByteArray_AS_STRING(rows->storage);
    if (offset < 0 || offset % rows->stride != 0 || offset / rows->stride >= rows->count)
        return NULL;
    return Py_NewRef(v);
}

int bw_vec_rows_add_type(PyObject *module) {
    return bw_state_add_type(module, BW_TYPE_VECTOR_ROWS, &VectorRows_spec);
}
