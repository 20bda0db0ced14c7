#ifndef BW_PY_CQL_H
#define BW_PY_CQL_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds the CQL statement functions (py_cql.c) to the module, after the vector types. 0, or
   -1 with an exception set. */
int bw_cql_add_to_module(PyObject *module);
#endif
