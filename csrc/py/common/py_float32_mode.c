/* See py_float32_mode.h. */
#include "py_float32_mode.h"

static const char *const mode_names[2] = {"widen", "shortest"};

int bw_float32_mode_converter(PyObject *value, void *shortest) {
    for (int mode = 0; mode < 2; mode++) {
        if (PyUnicode_Check(value) && PyUnicode_CompareWithASCIIString(value, mode_names[mode]) == 0) {
            *(int *)shortest = mode;
            return 1;
        }
    }
    PyErr_Format(PyExc_ValueError, "float32 must be '%s' or '%s', not %R", mode_names[0],
                 mode_names[1], value);
    return 0;
}

PyObject *bw_float32_modes(void) {
    return Py_BuildValue("(ss)", mode_names[0], mode_names[1]);
}

PyObject *bw_float32_mode_name(int shortest) {
    return PyUnicode_FromString(mode_names[shortest != 0]);
}
