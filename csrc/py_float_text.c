/* Placeholder until the float-text hooks land. */
#include "py_float_text.h"

int bw_float_text_add_functions(PyObject *module) {
    (void)module;
    return 0;
}
