/* CqlRing, the token ring's Python type (py_cql_ring.c). */
#ifndef BW_PY_CQL_RING_H
#define BW_PY_CQL_RING_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds CqlRing to the module. 0, or -1 with an exception set. */
int bw_cql_ring_add_to_module(PyObject *module);
#endif
