#ifndef BW_PY_VECTORS_H
#define BW_PY_VECTORS_H
#include <Python.h>
/* Adds the vectors types and functions to the module. 0, or -1 with an exception set. */
int bw_vectors_add_to_module(PyObject *module);
/* Adds the vint and Arrow view test hooks to the test hooks' namespace. 0, or -1. */
int bw_vectors_add_test_hooks(PyObject *testing);
#endif
