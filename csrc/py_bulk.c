/* Placeholder until the bulk binding lands. */
#include "py_bulk.h"

int bw_bulk_add_to_module(PyObject *module) {
    (void)module;
    return 0;
}
