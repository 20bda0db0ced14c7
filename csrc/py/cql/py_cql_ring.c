/* CqlRing: the token ring of a cluster (core: cql_ring.c), node indexes per token with
   SimpleStrategy replica placement. */
#include "py_cql_ring.h"

#include "py_state.h"

#include "cql_ring.h"

typedef struct {
    PyObject_HEAD
    bw_cql_ring ring;
} CqlRingObject;

static PyObject *CqlRing_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"tokens", "nodes", "node_count", "rf", NULL};
    PyObject *tokens, *nodes;
    int n_nodes, rf;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOii:CqlRing", kwlist, &tokens, &nodes,
                                     &n_nodes, &rf))
        return NULL;
    PyObject *t_seq = PySequence_Fast(tokens, "tokens must be a sequence of int"); /* new */
    PyObject *n_seq = t_seq ? PySequence_Fast(nodes, "nodes must be a sequence of int") : NULL;
    int64_t *tv = NULL;
    int32_t *nv = NULL;
    CqlRingObject *self = NULL;
    if (n_seq == NULL)
        goto cleanup;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(t_seq);
    if (PySequence_Fast_GET_SIZE(n_seq) != n) {
        PyErr_SetString(PyExc_ValueError, "tokens and nodes must have the same length");
        goto cleanup;
    }
    tv = PyMem_Malloc(sizeof *tv * ((size_t)n + 1));
    nv = PyMem_Malloc(sizeof *nv * ((size_t)n + 1));
    if (tv == NULL || nv == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long t = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(t_seq, i));
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(n_seq, i));
        if (PyErr_Occurred())
            goto cleanup;
        if (v < 0 || v >= n_nodes) {
            PyErr_Format(PyExc_ValueError, "nodes[%zd] = %ld is not a node index (0 to %d)", i,
                         v, n_nodes - 1);
            goto cleanup;
        }
        tv[i] = t;
        nv[i] = (int32_t)v;
    }
    self = (CqlRingObject *)type->tp_alloc(type, 0); /* new reference */
    if (self == NULL)
        goto cleanup;
    int rc = bw_cql_ring_build(&self->ring, tv, nv, (size_t)n, n_nodes, rf);
    if (rc < 0) {
        if (rc == -1)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, "a ring needs at least one token, node_count >= 1 "
                            "and rf >= 1");
        Py_CLEAR(self);
    }
cleanup:
    PyMem_Free(tv);
    PyMem_Free(nv);
    Py_XDECREF(t_seq);
    Py_XDECREF(n_seq);
    return (PyObject *)self;
}

static void CqlRing_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    bw_cql_ring_free(&((CqlRingObject *)self)->ring);
    bw_heap_free(self);
}

/* replicas(token) -> tuple of node indexes, the primary first. New reference. */
static PyObject *CqlRing_replicas(PyObject *self, PyObject *arg) {
    long long token = PyLong_AsLongLong(arg);
    if (token == -1 && PyErr_Occurred())
        return NULL;
    const bw_cql_ring *ring = &((CqlRingObject *)self)->ring;
    const int32_t *r = bw_cql_ring_replicas(ring, token);
    PyObject *out = PyTuple_New(ring->rf);
    for (int i = 0; out != NULL && i < ring->rf; i++) {
        PyObject *v = PyLong_FromLong(r[i]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

/* primaries(tokens) -> bytes: for a buffer of native int64 tokens, the primary replica of
   each as native int32, computed with the GIL released. New reference. */
static PyObject *CqlRing_primaries(PyObject *self, PyObject *arg) {
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = NULL;
    if (in.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "tokens must be native int64s (a multiple of 8 bytes)");
        goto cleanup;
    }
    Py_ssize_t n = in.len / 8;
    out = PyBytes_FromStringAndSize(NULL, n * 4);
    if (out == NULL)
        goto cleanup;
    const bw_cql_ring *ring = &((CqlRingObject *)self)->ring;
    const char *src = in.buf;
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS /* the input stays exported and the new bytes are ours alone */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t;
        memcpy(&t, src + 8 * i, 8);
        memcpy(dst + 4 * i, bw_cql_ring_replicas(ring, t), 4);
    }
    Py_END_ALLOW_THREADS
cleanup:
    PyBuffer_Release(&in);
    return out;
}

static PyObject *CqlRing_get_rf(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(((CqlRingObject *)self)->ring.rf);
}

static PyMethodDef CqlRing_methods[] = {
    {"replicas", CqlRing_replicas, METH_O,
     "replicas(token) -> tuple[int, ...]: the node indexes holding the token, primary first."},
    {"primaries", CqlRing_primaries, METH_O,
     "primaries(tokens) -> bytes: each native int64 token's primary node index as native "
     "int32."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CqlRing_getset[] = {
    {"rf", CqlRing_get_rf, NULL, "replicas per token (at most the nodes owning tokens)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot CqlRing_slots[] = {
    {Py_tp_doc, "CqlRing(tokens, nodes, node_count, rf): a Murmur3 token ring (node indexes "
                "per token) with SimpleStrategy replica placement."},
    {Py_tp_new, CqlRing_new},
    {Py_tp_dealloc, CqlRing_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, CqlRing_methods},
    {Py_tp_getset, CqlRing_getset},
    {0, NULL},
};

static PyType_Spec CqlRing_spec = {
    .name = "bulkwire._core.CqlRing",
    .basicsize = sizeof(CqlRingObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = CqlRing_slots,
};

int bw_cql_ring_add_to_module(PyObject *module) {
    return bw_state_add_type(module, BW_TYPE_CQL_RING, &CqlRing_spec);
}
