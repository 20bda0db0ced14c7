/* cql_shards: each token's shard on a ScyllaDB node (core: cql_shard.c). */
#include "py_cql_shard.h"

#include "cql_shard.h"

#include <string.h>

/* cql_shards(tokens, nr_shards, ignore_msb) -> bytes: a new reference, or NULL. */
static PyObject *cql_shards(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"tokens", "nr_shards", "ignore_msb", NULL};
    Py_buffer in;
    int shards, msb;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*ii:cql_shards", kwlist, &in, &shards,
                                     &msb))
        return NULL;
    PyObject *out = NULL;
    int64_t *tokens = NULL;
    int32_t *shard = NULL;
    if (in.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "tokens must be native int64 (a multiple of 8 bytes)");
        goto cleanup;
    }
    if (shards < 1 || shards > BW_CQL_SHARDS_MAX || msb < 0 || msb > 63) {
        PyErr_Format(PyExc_ValueError, "nr_shards must be 1..%d and ignore_msb 0..63, not %d "
                     "and %d", BW_CQL_SHARDS_MAX, shards, msb);
        goto cleanup;
    }
    size_t n = (size_t)in.len / 8;
    tokens = PyMem_Malloc(n ? n * 8 : 1); /* a copy: aligned for the core */
    shard = PyMem_Malloc(n ? n * 4 : 1);
    if (tokens == NULL || shard == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    memcpy(tokens, in.buf, n * 8);
    Py_BEGIN_ALLOW_THREADS
    bw_cql_shards_of(tokens, n, (uint32_t)shards, (unsigned)msb, shard);
    Py_END_ALLOW_THREADS
    out = PyBytes_FromStringAndSize((const char *)shard, (Py_ssize_t)(n * 4));
cleanup:
    PyMem_Free(shard);
    PyMem_Free(tokens);
    PyBuffer_Release(&in);
    return out;
}

static PyMethodDef shard_functions[] = {
    {"cql_shards", (PyCFunction)(void (*)(void))cql_shards, METH_VARARGS | METH_KEYWORDS,
     "cql_shards(tokens, nr_shards, ignore_msb) -> bytes: each native int64 Murmur3 token's "
     "shard on a ScyllaDB node of nr_shards shards, as native int32."},
    {NULL, NULL, 0, NULL},
};

int bw_cql_shard_add_to_module(PyObject *module) {
    if (PyModule_AddFunctions(module, shard_functions) < 0 ||
        PyModule_AddIntConstant(module, "CQL_SHARDS_MAX", BW_CQL_SHARDS_MAX) < 0)
        return -1;
    return 0;
}
