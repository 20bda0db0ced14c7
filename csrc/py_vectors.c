/* Placeholder until the vectors binding lands. */
#include "py_vectors.h"

int bw_vectors_add_to_module(PyObject *module) {
    (void)module;
    return 0;
}
