/* Test hooks for the float-to-text core (binding layer; knows Python). */
#ifndef BW_PY_FLOAT_TEXT_H
#define BW_PY_FLOAT_TEXT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds format_doubles and format_floats32 to the test hooks' namespace. 0, or -1 with an exception set. */
int bw_float_text_add_functions(PyObject *module);
#endif
