/* The binding's side of fork_origin.h: the one refusal a forked child gets from an object it
   inherited whose locks, threads or connections belong to the process it was forked from. */
#ifndef BW_PY_FORK_ORIGIN_H
#define BW_PY_FORK_ORIGIN_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "fork_origin.h"

/* Sets RuntimeError: `what` (e.g. "this HandoverQueue") was made by the process this one
   was forked from, which still owns `owned` (e.g. "its consumer thread"); the child must make
   its own. Returns NULL. */
PyObject *bw_raise_inherited(const char *what, const char *owned);

/* 0 in the process that recorded origin; in a forked child, bw_raise_inherited and -1. */
int bw_check_origin(const bw_origin *origin, const char *what, const char *owned);
#endif
