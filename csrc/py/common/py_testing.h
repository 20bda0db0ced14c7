/* The test hooks' namespace, bulkwire._core._testing (see py_testing.c). */
#ifndef BW_PY_TESTING_H
#define BW_PY_TESTING_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds the attribute _testing, the module object of the test hooks. 0, or -1 with an
   exception set. */
int bw_testing_add_to_module(PyObject *module);
#endif
