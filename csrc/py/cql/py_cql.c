/* The CQL statement layer's functions: partition tokens, a CQL type's canonical text, and
   QUERY and PREPARE bodies (core: murmur3.c, cql_statement.c); and the module functions of
   its rooms too (py_cql_rooms.h): the schema check (py_cql_schema.c), EXECUTE bodies
   (py_cql_execute.c) and RESULT parsing (py_cql_result.c). The token ring is py_cql_ring.c's. */
#include "py_cql.h"
#include "py_cql_rooms.h"

#include "murmur3.h"

/* The UTF-8 of a str argument (*n bytes), or NULL with a TypeError naming `what`. */
static const char *str_arg(PyObject *arg, Py_ssize_t *n, const char *what) {
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, n) : NULL;
    if (text == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "expected %s as str", what);
    return text;
}

/* The bytes a writer put in out (rc 0), or MemoryError (rc < 0); out is freed. New
   reference, or NULL. */
static PyObject *written_bytes(int rc, bw_buf *out) {
    PyObject *result = rc < 0 ? PyErr_NoMemory()
                              : PyBytes_FromStringAndSize(out->data ? out->data : "",
                                                          (Py_ssize_t)out->len);
    bw_buf_free(out);
    return result;
}

/* cql_partition_token(components) -> int: the Murmur3 token of a partition key given as its
   components' serialized values (a sequence of bytes-like; one component: the token of its
   bytes). Returns a new reference. */
static PyObject *module_cql_partition_token(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "components must be a sequence of bytes"); /* new */
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    Py_buffer *views = NULL;
    const uint8_t **parts = NULL;
    int32_t *lens = NULL;
    Py_ssize_t got = 0;
    bw_buf scratch = {0};
    if (n < 1 || n > 65535) {
        PyErr_SetString(PyExc_ValueError, "a partition key has 1 to 65535 components");
        goto cleanup;
    }
    views = PyMem_Calloc((size_t)n, sizeof *views);
    parts = PyMem_Calloc((size_t)n, sizeof *parts);
    lens = PyMem_Calloc((size_t)n, sizeof *lens);
    if (views == NULL || parts == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got],
                               PyBUF_SIMPLE) < 0)
            goto cleanup;
        if (views[got].len > INT32_MAX) {
            got++;
            PyErr_SetString(PyExc_ValueError, "a component is longer than 2**31 - 1 bytes");
            goto cleanup;
        }
        parts[got] = views[got].buf;
        lens[got] = (int32_t)views[got].len;
    }
    int64_t token;
    int rc = bw_cql_partition_token(parts, lens, (int)n, &scratch, &token);
    if (rc == -1)
        PyErr_NoMemory();
    else if (rc == -2)
        PyErr_SetString(PyExc_ValueError, "a component of a composite partition key is longer "
                        "than 65535 bytes");
    else
        result = PyLong_FromLongLong(token);
cleanup:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(parts);
    PyMem_Free(lens);
    bw_buf_free(&scratch);
    Py_DECREF(seq);
    return result;
}

/* cql_murmur3_hash(key) -> int: the first half of MurmurHash3 as Murmur3Partitioner
   computes it, before the minimum is mapped (the driver's cassandra.murmur3.murmur3).
   Returns a new reference. */
static PyObject *module_cql_murmur3_hash(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer key;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t h = bw_murmur3_hash(key.buf, (size_t)key.len);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(h);
}

/* cql_type_text(text) -> str: the CQL type text in its canonical form ("vector<float, 3>"),
   or ValueError. Returns a new reference. */
static PyObject *module_cql_type_text(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n;
    const char *text = str_arg(arg, &n, "the CQL type");
    if (text == NULL)
        return NULL;
    bw_cql_type t;
    char err[400], out[64];
    if (bw_cql_type_parse(text, (size_t)n, &t, err, sizeof err) < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    bw_cql_type_text(&t, out, sizeof out);
    return PyUnicode_FromString(out);
}

/* ---------------------------------------------------------------- QUERY and PREPARE */

/* cql_query_body(query, consistency, *, page_size=0, paging_state=None) -> bytes: a QUERY
   body without values (protocol v4). Returns a new reference. */
static PyObject *module_cql_query_body(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"query", "consistency", "page_size", "paging_state", NULL};
    const char *query;
    Py_ssize_t n;
    int consistency, page_size = 0;
    PyObject *paging = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#i|$iO:cql_query_body", kwlist, &query, &n,
                                     &consistency, &page_size, &paging))
        return NULL;
    if (consistency < 0 || consistency > 0xffff || page_size < 0) {
        PyErr_SetString(PyExc_ValueError, "consistency is 0 to 65535, page_size not negative");
        return NULL;
    }
    Py_buffer state = {0};
    if (paging != Py_None && PyObject_GetBuffer(paging, &state, PyBUF_SIMPLE) < 0)
        return NULL;
    bw_cql_params p = {.consistency = (uint16_t)consistency, .page_size = page_size,
                       .paging_state = paging != Py_None ? state.buf : NULL,
                       .paging_state_len = (size_t)state.len};
    bw_buf out = {0};
    PyObject *result = written_bytes(bw_cql_put_query(&out, query, (size_t)n, &p), &out);
    if (paging != Py_None)
        PyBuffer_Release(&state);
    return result;
}

/* cql_prepare_body(query) -> bytes: a PREPARE body (protocol v4). Returns a new reference. */
static PyObject *module_cql_prepare_body(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n;
    const char *query = str_arg(arg, &n, "the query");
    if (query == NULL)
        return NULL;
    bw_buf out = {0};
    return written_bytes(bw_cql_put_prepare(&out, query, (size_t)n), &out);
}

static PyMethodDef cql_functions[] = {
    {"cql_execute_bodies", (PyCFunction)(void (*)(void))bw_cql_execute_bodies,
     METH_VARARGS | METH_KEYWORDS,
     "cql_execute_bodies(batch, prepared_id, names, types, pk_indexes, consistency, *, "
     "first_row=0, serial_consistency=0, timestamp=None, unset=None, refusing=False) -> "
     "(bytearray bodies, bytes ends, bytes tokens or None[, refused])\n\nEvery row of an "
     "Arrow batch as an EXECUTE body (protocol v4) of the prepared statement, with its "
     "partition token (native int64 arrays). A bad row raises RowError; with refusing, the "
     "bad rows are left out and listed as (row, column, reason) tuples, all in one pass."},
    {"cql_check_schema", bw_cql_check_schema, METH_VARARGS,
     "cql_check_schema(schema, names, types): raises SchemaMismatchError naming the first "
     "column whose Arrow type cannot be bound to its CQL type."},
    {"cql_partition_token", module_cql_partition_token, METH_O,
     "cql_partition_token(components) -> int: the Murmur3Partitioner token of a partition "
     "key from its components' serialized values."},
    {"cql_murmur3_hash", module_cql_murmur3_hash, METH_O,
     "cql_murmur3_hash(key) -> int: Murmur3Partitioner's hash of the bytes, before the "
     "minimum long is mapped to the maximum."},
    {"cql_query_body", (PyCFunction)(void (*)(void))module_cql_query_body,
     METH_VARARGS | METH_KEYWORDS,
     "cql_query_body(query, consistency, *, page_size=0, paging_state=None) -> bytes: a "
     "QUERY body without values (protocol v4)."},
    {"cql_prepare_body", module_cql_prepare_body, METH_O,
     "cql_prepare_body(query) -> bytes: a PREPARE body (protocol v4)."},
    {"cql_parse_result", bw_cql_parse_result, METH_O,
     "cql_parse_result(body) -> dict: a RESULT body (protocol v4) read with every length "
     "checked; ValueError when malformed."},
    {"cql_type_text", module_cql_type_text, METH_O,
     "cql_type_text(text) -> str: a CQL type's text in canonical form."},
    {NULL, NULL, 0, NULL},
};

int bw_cql_add_to_module(PyObject *module) {
    return PyModule_AddFunctions(module, cql_functions);
}
