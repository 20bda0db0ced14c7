/* The consumers of a body's queue: next_piece and pump_body. */
#ifndef BW_PY_BODY_PUMP_H
#define BW_PY_BODY_PUMP_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds next_piece and pump_body. 0, or -1 with an exception set. */
int bw_body_pump_add_to_module(PyObject *module);
#endif
