#ifndef BW_PY_BULK_H
#define BW_PY_BULK_H
#include <Python.h>
/* Adds the bulk types and functions to the module. 0, or -1 with an exception set. */
int bw_bulk_add_to_module(PyObject *module);
#endif
