#ifndef BW_PY_FLOAT_TEXT_H
#define BW_PY_FLOAT_TEXT_H
#include <Python.h>
/* Adds the float-text test hooks to the module. 0, or -1 with an exception set. */
int bw_float_text_add_functions(PyObject *module);
#endif
