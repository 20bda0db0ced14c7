/* The one guard of the binding's objects that own a connection, a session, a body or a
   compression stream: each call first checks that the object is not closed, that it is not
   a forked child's copy (py_fork_origin.h), that it is called from its owner thread when it
   has one, and that no other call is under way (a call that runs with the GIL released, or
   one it made into Python); then marks the object in use until the call ends. The messages
   are the object's own (bw_guard_words). */
#ifndef BW_PY_GUARD_H
#define BW_PY_GUARD_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* What an object's refusals say. */
typedef struct {
    const char *closed;       /* ValueError of a call after close ("the CqlConnection is
                                 closed") */
    const char *what;         /* a forked child's refusal (bw_raise_inherited): the object */
    const char *owned;        /* and what it owns that belongs to the parent */
    const char *in_use;       /* RuntimeError of a call while another is under way; NULL:
                                 the caller says it (bw_guard_enter gives BW_GUARD_BUSY) */
    const char *other_thread; /* RuntimeError of a call from a thread that is not the owner
                                 (the first thread that called); NULL: any thread may call */
} bw_guard_words;

/* Embedded in the object, zeroed when it is made. */
typedef struct {
    int busy;            /* a call is under way */
    int owned;           /* owner is set */
    unsigned long owner; /* the thread of the first call (objects with other_thread) */
} bw_guard;

/* bw_guard_enter's result when the object is busy and words->in_use is NULL: no exception
   is set, the caller raises its own. */
#define BW_GUARD_BUSY (-2)

/* The checks without taking the object, in this order: closed (the caller's state),
   inherited (bw_origin_inherited of the object, or the core's own test), the owner thread.
   0, or -1 with the exception set. Holds the GIL: claiming the owner cannot race. */
int bw_guard_check(bw_guard *guard, const bw_guard_words *words, int closed, int inherited);

/* bw_guard_check, then refuses a call while another is under way, then marks the object in
   use. 0 (call bw_guard_leave when done), -1 with the exception set, or BW_GUARD_BUSY. */
int bw_guard_enter(bw_guard *guard, const bw_guard_words *words, int closed, int inherited);

/* The call ends: the object is free again. */
void bw_guard_leave(bw_guard *guard);

/* The RuntimeError of a call while another is under way (e.g. close() then). -1. */
int bw_guard_refuse_in_use(const bw_guard_words *words);
#endif
