/* See py_fork_origin.h. */
#include "py_fork_origin.h"

#include "py_errors.h"
#include "status.h"

PyObject *bw_raise_inherited(const char *what, const char *owned) {
    bw_status st;
    bw_status_inherited(&st, what, owned);
    return bw_raise_status(&st);
}

int bw_check_origin(const bw_origin *origin, const char *what, const char *owned) {
    if (!bw_origin_inherited(origin))
        return 0;
    bw_raise_inherited(what, owned);
    return -1;
}
