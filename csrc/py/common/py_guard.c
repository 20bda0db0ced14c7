/* See py_guard.h. */
#include "py_guard.h"

#include "py_fork_origin.h"

int bw_guard_check(bw_guard *guard, const bw_guard_words *words, int closed, int inherited) {
    if (closed) {
        PyErr_SetString(PyExc_ValueError, words->closed);
        return -1;
    }
    if (inherited) {
        bw_raise_inherited(words->what, words->owned);
        return -1;
    }
    if (words->other_thread != NULL) {
        unsigned long me = PyThread_get_thread_ident();
        if (!guard->owned) {
            guard->owner = me;
            guard->owned = 1;
        } else if (guard->owner != me) {
            PyErr_SetString(PyExc_RuntimeError, words->other_thread);
            return -1;
        }
    }
    return 0;
}

int bw_guard_enter(bw_guard *guard, const bw_guard_words *words, int closed, int inherited) {
    if (bw_guard_check(guard, words, closed, inherited) < 0)
        return -1;
    if (guard->busy) {
        if (words->in_use == NULL)
            return BW_GUARD_BUSY;
        return bw_guard_refuse_in_use(words);
    }
    guard->busy = 1;
    return 0;
}

void bw_guard_leave(bw_guard *guard) {
    guard->busy = 0;
}

int bw_guard_refuse_in_use(const bw_guard_words *words) {
    PyErr_SetString(PyExc_RuntimeError, words->in_use);
    return -1;
}
