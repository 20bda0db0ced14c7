/* bulkwire._core's build configuration: what setup.py found (binding layer; knows Python). */
#ifndef BW_PY_BUILD_CONFIG_H
#define BW_PY_BUILD_CONFIG_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds build_config(). 0, or -1 with an exception set. */
int bw_build_config_add_to_module(PyObject *module);
#endif
