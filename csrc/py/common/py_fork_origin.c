/* See py_fork_origin.h. */
#include "py_fork_origin.h"

PyObject *bw_raise_inherited(const char *what, const char *owned) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s was made by the process this one was forked from, and a forked child "
                 "cannot use it: %s belong to that process. Make a new one in the child.",
                 what, owned);
    return NULL;
}

int bw_check_origin(const bw_origin *origin, const char *what, const char *owned) {
    if (!bw_origin_inherited(origin))
        return 0;
    bw_raise_inherited(what, owned);
    return -1;
}
