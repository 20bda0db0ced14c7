/* bulkwire._core.VectorCodec: the CQL vector<T, N> codec type and the module's vector test
   hooks. The work is in py_encode_vector.c and py_decode_vector.c. */
#include "py_vector_codec.h"

#include "py_arrow.h"
#include "py_float32_mode.h"
#include "py_state.h"
#include "py_vectors.h"
#include "vint.h"

/* CQL time: nanoseconds since midnight, below this. */
#define TIME_NANOS_PER_DAY 86400000000000LL

/* Fixed-width subtypes first, then the variable-width ones (every element behind a vint).
   lo/hi: the integer range of the wire value (unused for the others). */
static const bw_subtype subtypes[] = {
    {"float", BW_V_F32, 4, 0, NPY_FLOAT32, 'f', 0, 0},
    {"double", BW_V_F64, 8, 0, NPY_FLOAT64, 'f', 0, 0},
    {"int", BW_V_I32, 4, 0, NPY_INT32, 'i', INT32_MIN, INT32_MAX},
    {"bigint", BW_V_I64, 8, 0, NPY_INT64, 'i', INT64_MIN, INT64_MAX},
    {"boolean", BW_V_BOOL, 1, 0, NPY_BOOL, 'b', 0, 1},
    {"timestamp", BW_V_TIMESTAMP, 8, 0, NPY_INT64, 'i', INT64_MIN, INT64_MAX},
    {"uuid", BW_V_UUID, 16, 0, -1, 0, 0, 0},
    {"timeuuid", BW_V_UUID, 16, 0, -1, 0, 0, 0},
    {"smallint", BW_V_I16, 2, 1, NPY_INT16, 'i', INT16_MIN, INT16_MAX},
    {"tinyint", BW_V_I8, 1, 1, NPY_INT8, 'i', INT8_MIN, INT8_MAX},
    /* the raw CQL value: days with the epoch at 2**31 */
    {"date", BW_V_DATE, 4, 1, NPY_UINT32, 'u', 0, UINT32_MAX},
    /* nanoseconds since midnight */
    {"time", BW_V_TIME, 8, 1, NPY_INT64, 'i', 0, TIME_NANOS_PER_DAY - 1},
    {"text", BW_V_TEXT, 0, 1, -1, 0, 0, 0},
    {"varchar", BW_V_TEXT, 0, 1, -1, 0, 0, 0},
    {"ascii", BW_V_ASCII, 0, 1, -1, 0, 0, 0},
    {"blob", BW_V_BLOB, 0, 1, -1, 0, 0, 0},
    {"varint", BW_V_VARINT, 0, 1, -1, 0, 0, 0},
};
#define N_SUBTYPES (sizeof subtypes / sizeof subtypes[0])

/* Largest dimension accepted: far above any vector database's limit, small enough that a
   row's size never overflows. */
#define MAX_DIMENSION (1 << 24)

static PyObject *VectorCodec_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"subtype", "dimension", "driver_compat", NULL};
    PyObject *name;
    Py_ssize_t dim;
    int driver_compat = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Un|$p:VectorCodec", kwlist, &name, &dim,
                                     &driver_compat))
        return NULL;
    const char *text = PyUnicode_AsUTF8(name);
    if (text == NULL)
        return NULL;
    const bw_subtype *st = NULL;
    for (size_t i = 0; i < N_SUBTYPES; i++)
        if (strcmp(subtypes[i].name, text) == 0)
            st = &subtypes[i];
    if (st == NULL) {
        PyErr_Format(PyExc_ValueError, "unsupported vector subtype %R: expected one of float, "
                     "double, int, bigint, boolean, timestamp, uuid, timeuuid, smallint, "
                     "tinyint, date, time, text, varchar, ascii, blob, varint", name);
        return NULL;
    }
    if (dim < 1 || dim > MAX_DIMENSION) {
        PyErr_Format(PyExc_ValueError, "vector dimension must be between 1 and %d, got %zd",
                     MAX_DIMENSION, dim);
        return NULL;
    }
    bw_vector_codec *c = (bw_vector_codec *)type->tp_alloc(type, 0); /* new reference */
    if (c == NULL)
        return NULL;
    c->st = st;
    c->dim = dim;
    c->elem_size = st->width ? st->width + st->prefixed : 0;
    c->row_size = c->elem_size * dim;
    c->driver_compat = driver_compat;
    return (PyObject *)c;
}

static void VectorCodec_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    bw_heap_free(self);
}

static PyObject *VectorCodec_repr(PyObject *self) {
    bw_vector_codec *c = (bw_vector_codec *)self;
    return PyUnicode_FromFormat("%s('%s', %zd)", _PyType_Name(Py_TYPE(self)), c->st->name,
                                c->dim);
}

/* Methods: thin shims over py_encode_vector.c / py_decode_vector.c; each returns a new
   reference. */
static PyObject *VectorCodec_serialize(PyObject *self, PyObject *v) {
    return bw_vec_serialize((bw_vector_codec *)self, v);
}
static PyObject *VectorCodec_serialize_many(PyObject *self, PyObject *batch) {
    return bw_vec_serialize_many((bw_vector_codec *)self, batch);
}
static PyObject *VectorCodec_serialize_into(PyObject *self, PyObject *batch) {
    return bw_vec_serialize_into((bw_vector_codec *)self, batch);
}
static PyObject *VectorCodec_serialize_rows(PyObject *self, PyObject *batch) {
    return bw_vec_serialize_rows((bw_vector_codec *)self, batch);
}
static PyObject *VectorCodec_deserialize(PyObject *self, PyObject *b) {
    return bw_vec_deserialize((bw_vector_codec *)self, b);
}
static PyObject *VectorCodec_deserialize_many(PyObject *self, PyObject *items) {
    return bw_vec_deserialize_many((bw_vector_codec *)self, items);
}

/* The drop-in's fast path in one call: the codec's bytes for an exact list/tuple, or an
   exact ndarray whose dtype kind is in `kinds`; None when the input is not taken or the codec
   raised an Exception (the caller then runs the driver's own code, which raises its own
   error). BaseExceptions that are not Exceptions (KeyboardInterrupt) propagate. */
static PyObject *VectorCodec_driver_serialize(PyObject *self, PyObject *const *args,
                                              Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_driver_serialize(v, kinds: str)");
        return NULL;
    }
    PyObject *v = args[0];
    PyTypeObject *t = Py_TYPE(v);
    int exact_array = t == &PyList_Type || t == &PyTuple_Type ? 0 : bw_numpy_is_exact_array(v);
    if (exact_array < 0)
        return NULL;
    if (exact_array) {
        const char *kinds = PyUnicode_AsUTF8(args[1]);
        if (kinds == NULL)
            return NULL;
        char kind = PyArray_DESCR((PyArrayObject *)v)->kind;
        if (kind == '\0' || strchr(kinds, kind) == NULL)
            Py_RETURN_NONE;
    } else if (t != &PyList_Type && t != &PyTuple_Type) {
        /* a row serialize_rows already wrote for this subtype and dimension goes as it is */
        PyObject *ready = bw_vec_rows_ready_row((bw_vector_codec *)self, v);
        if (ready != NULL)
            return ready;
        Py_RETURN_NONE;
    }
    PyObject *out = bw_vec_serialize((bw_vector_codec *)self, v); /* new reference */
    if (out == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return out;
}

/* Decoding for the drop-in: the driver's list (or, with as_numpy, the ndarray), or None when
   the codec raised an Exception. */
static PyObject *VectorCodec_driver_deserialize(PyObject *self, PyObject *const *args,
                                                Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_driver_deserialize(b, as_numpy)");
        return NULL;
    }
    int as_numpy = PyObject_IsTrue(args[1]);
    if (as_numpy < 0)
        return NULL;
    PyObject *out = as_numpy ? bw_vec_deserialize((bw_vector_codec *)self, args[0])
                             : bw_vec_deserialize_list((bw_vector_codec *)self, args[0]);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *VectorCodec_to_json_many(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"batch", "float32", NULL};
    PyObject *batch;
    int shortest = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O&:to_json_many", kwlist, &batch,
                                     bw_float32_mode_converter, &shortest))
        return NULL;
    return bw_vec_to_json_many((bw_vector_codec *)self, batch, shortest);
}

static PyMethodDef VectorCodec_methods[] = {
    {"serialize", VectorCodec_serialize, METH_O,
     "serialize(v) -> bytes: one vector (1-D ndarray, sequence, or ready bytes) as CQL bytes."},
    {"serialize_many", VectorCodec_serialize_many, METH_O,
     "serialize_many(batch) -> list[bytes]: one bytes object per row of a 2-D ndarray, an Arrow "
     "vector array/stream or a sequence of vectors."},
    {"serialize_into", VectorCodec_serialize_into, METH_O,
     "serialize_into(batch) -> (bytearray, stride): every row back to back in one buffer."},
    {"serialize_rows", VectorCodec_serialize_rows, METH_O,
     "serialize_rows(batch) -> VectorRows: every row back to back in one read-only buffer, "
     "rows[i] a memoryview of row i."},
    {"deserialize", VectorCodec_deserialize, METH_O,
     "deserialize(b) -> ndarray: zero-copy big-endian view for float/double/int/bigint/"
     "timestamp, a native copy otherwise."},
    {"deserialize_many", VectorCodec_deserialize_many, METH_O,
     "deserialize_many(items) -> 2-D ndarray (native byte order)."},
    {"to_json_many", (PyCFunction)(void (*)(void))VectorCodec_to_json_many,
     METH_VARARGS | METH_KEYWORDS,
     "to_json_many(batch, *, float32='widen') -> list[bytes]: each row as a JSON array, "
     "byte-identical to bulkwire.dumps(row)."},
    {"_driver_serialize", (PyCFunction)(void (*)(void))VectorCodec_driver_serialize, METH_FASTCALL,
     "_driver_serialize(v, kinds) -> bytes | memoryview | None: bulkwire.cql's fast path."},
    {"_driver_deserialize", (PyCFunction)(void (*)(void))VectorCodec_driver_deserialize,
     METH_FASTCALL,
     "_driver_deserialize(b, as_numpy) -> list | ndarray | None: bulkwire.cql's decoding."},
    {NULL, NULL, 0, NULL},
};

static PyObject *VectorCodec_get_subtype(PyObject *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(((bw_vector_codec *)self)->st->name);
}
static PyObject *VectorCodec_get_dimension(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(((bw_vector_codec *)self)->dim);
}
static PyObject *VectorCodec_get_serialized_size(PyObject *self, void *closure) {
    (void)closure;
    bw_vector_codec *c = (bw_vector_codec *)self;
    if (c->row_size == 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(c->row_size);
}
static PyObject *VectorCodec_get_variable_width(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(((bw_vector_codec *)self)->st->prefixed);
}

static PyGetSetDef VectorCodec_getset[] = {
    {"subtype", VectorCodec_get_subtype, NULL, "CQL name of the element type.", NULL},
    {"dimension", VectorCodec_get_dimension, NULL, "Number of elements N.", NULL},
    {"serialized_size", VectorCodec_get_serialized_size, NULL,
     "Bytes of one serialized vector, or None when it varies (text, blob, varint).", NULL},
    {"variable_width", VectorCodec_get_variable_width, NULL,
     "True when each element is preceded by its vint length on the wire.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot VectorCodec_slots[] = {
    {Py_tp_doc, "VectorCodec(subtype, dimension): CQL vector<subtype, dimension> to and from "
                "bytes, from NumPy, Arrow and sequences."},
    {Py_tp_new, VectorCodec_new},
    {Py_tp_dealloc, VectorCodec_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_repr, VectorCodec_repr},
    {Py_tp_methods, VectorCodec_methods},
    {Py_tp_getset, VectorCodec_getset},
    {0, NULL},
};

static PyType_Spec VectorCodec_spec = {
    .name = "bulkwire._core.VectorCodec",
    .basicsize = sizeof(bw_vector_codec),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = VectorCodec_slots,
};

/* ---- test hooks for the core pieces ------------------------------------------------------ */

static PyObject *module_vint_pack(PyObject *module, PyObject *arg) {
    (void)module;
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned char buf[BW_VINT_MAX];
    size_t n = bw_vint_write(v, buf);
    return PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)n);
}

static PyObject *module_vint_unpack(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint64_t v = 0;
    size_t used = bw_vint_read(view.buf, (size_t)view.len, &v);
    PyBuffer_Release(&view);
    if (used == 0) {
        PyErr_SetString(PyExc_ValueError, "truncated vint");
        return NULL;
    }
    return Py_BuildValue("(Kn)", (unsigned long long)v, (Py_ssize_t)used);
}

/* _arrow_vectors_info(obj) -> list of dicts, one per array: what arrow_c.h reads. */
static PyObject *module_arrow_vectors_info(PyObject *module, PyObject *obj) {
    (void)module;
    bw_arrow_source src;
    if (bw_arrow_source_open(obj, &src) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    int rc = out ? 1 : -1;
    char err[200];
    while (rc == 1 && (rc = bw_arrow_source_next(&src)) == 1) {
        bw_arrow_vectors v;
        if (bw_arrow_vectors_view(&src.schema, &src.array, &v, err, sizeof err) < 0) {
            PyErr_SetString(PyExc_TypeError, err);
            rc = -1;
            break;
        }
        int64_t bad_row = -1, bad_len = -1;
        bw_arrow_row_problem why = BW_ARROW_ROW_OK;
        bw_arrow_vectors_check(&v, -1, &bad_row, &why, &bad_len);
        static const char *kinds[] = {"fixed_size_list", "list", "large_list"};
        PyObject *d = Py_BuildValue("{sssisLsLsLsi}", "kind", kinds[v.kind], "value_width",
                                    v.value_width, "length", (long long)v.length, "list_size",
                                    (long long)v.list_size, "bad_row", (long long)bad_row,
                                    "why", (int)why);
        if (d == NULL || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            rc = -1;
            break;
        }
        Py_DECREF(d);
        rc = 1;
    }
    bw_arrow_source_close(&src);
    if (rc < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

static PyMethodDef vectors_test_hooks[] = {
    {"vint_pack", module_vint_pack, METH_O, "CQL unsigned vint of n (test hook)."},
    {"vint_unpack", module_vint_unpack, METH_O, "(value, bytes used) of a vint (test hook)."},
    {"arrow_vectors_info", module_arrow_vectors_info, METH_O,
     "What the C Arrow reader sees in each array (test hook)."},
    {NULL, NULL, 0, NULL},
};

int bw_vectors_add_to_module(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_VECTOR_CODEC, &VectorCodec_spec) < 0)
        return -1;
    if (bw_vec_rows_add_type(module) < 0)
        return -1;
    PyObject *names = PyTuple_New((Py_ssize_t)N_SUBTYPES);
    if (names == NULL)
        return -1;
    for (size_t i = 0; i < N_SUBTYPES; i++) {
        PyObject *s = PyUnicode_FromString(subtypes[i].name);
        if (s == NULL) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, (Py_ssize_t)i, s);
    }
    if (PyModule_AddObject(module, "VECTOR_SUBTYPES", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return 0;
}

int bw_vectors_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, vectors_test_hooks);
}
