/* Piece: a finished piece of the request body, immutable bytes owned by C and exported
   read-only through the buffer protocol; and the accounting of the memory live pieces hold. */
#ifndef BW_PY_PIECE_H
#define BW_PY_PIECE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
    size_t cap;
    int recycle; /* a writer's buffer: its memory goes back to the pool */
    /* BW_PIECE_PENDING while the piece holds pending runs of float text (json_array.h) from
       first_run on: data and len are final only once bw_piece_settle has run. */
    _Atomic int pending;
    size_t first_run;
} bw_piece_object;

/* bw_piece_object.pending */
enum { BW_PIECE_SETTLED = 0, BW_PIECE_PENDING = 1, BW_PIECE_SETTLING = 2 };

/* 1 when obj is a Piece (the type has no subclass), known without a lookup: safe without
   the GIL for an object the caller holds. */
int bw_is_piece(PyObject *obj);

/* New reference. Takes ownership of data (malloc'd, cap bytes allocated): frees it (or, with
   recycle, gives it back to the buffer pool) on failure and when the piece dies. */
PyObject *bw_piece_from_memory(char *data, size_t len, size_t cap, int recycle);

/* Marks a new piece (not yet shared) as holding pending runs from offset first_run on
   (BW_JSON_RUN_NONE: none, nothing to do). */
void bw_piece_set_pending(bw_piece_object *piece, size_t first_run);

/* Writes the text of the piece's pending runs, once, whichever thread asks first; the others
   wait for it. With or without the GIL (it touches no Python object); every reader of a
   piece's data and len calls it first. */
void bw_piece_settle(bw_piece_object *piece);

/* Without the GIL, for a piece nobody else references: its memory goes back now and the
   piece is left empty (the object itself is released later, with the GIL). */
void bw_piece_give_back(bw_piece_object *piece);

/* Adds Piece. 0, or -1 with an exception set. */
int bw_piece_add_to_module(PyObject *module);
/* Adds the memory accounting hooks to the test hooks' namespace. 0, or -1. */
int bw_piece_add_test_hooks(PyObject *testing);
#endif
