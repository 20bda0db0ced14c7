/* CommandWriter: document conventions, command framing and hand-over, for BulkWriter. */
#ifndef BW_PY_COMMAND_WRITER_H
#define BW_PY_COMMAND_WRITER_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds CommandWriter. 0, or -1 with an exception set. */
int bw_command_writer_add_to_module(PyObject *module);
#endif
