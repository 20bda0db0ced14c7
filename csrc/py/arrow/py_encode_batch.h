#ifndef BW_PY_ENCODE_BATCH_H
#define BW_PY_ENCODE_BATCH_H
#include <Python.h>
/* Adds encode_batch (Arrow record batch -> bulk insert commands) to the module. */
int bw_encode_batch_add_to_module(PyObject *module);
#endif
