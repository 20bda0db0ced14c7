/* Chunk: a finished piece of the request body, immutable bytes owned by C and exported
   read-only through the buffer protocol; and the accounting of the memory live chunks hold. */
#ifndef BW_PY_CHUNK_H
#define BW_PY_CHUNK_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
    size_t cap;
    int recycle; /* a writer's buffer: its memory goes back to the pool */
    /* BW_CHUNK_PENDING while the chunk holds pending runs of float text (json_array.h) from
       first_run on: data and len are final only once bw_chunk_settle has run. */
    _Atomic int pending;
    size_t first_run;
} bw_chunk_object;

/* bw_chunk_object.pending */
enum { BW_CHUNK_SETTLED = 0, BW_CHUNK_PENDING = 1, BW_CHUNK_SETTLING = 2 };

extern PyTypeObject bw_chunk_type;

/* New reference. Takes ownership of data (malloc'd, cap bytes allocated): frees it (or, with
   recycle, gives it back to the buffer pool) on failure and when the chunk dies. */
PyObject *bw_chunk_from_memory(char *data, size_t len, size_t cap, int recycle);

/* Marks a new chunk (not yet shared) as holding pending runs from offset first_run on
   (BW_JSON_RUN_NONE: none, nothing to do). */
void bw_chunk_set_pending(bw_chunk_object *chunk, size_t first_run);

/* Writes the text of the chunk's pending runs, once, whichever thread asks first; the others
   wait for it. With or without the GIL (it touches no Python object); every reader of a
   chunk's data and len calls it first. */
void bw_chunk_settle(bw_chunk_object *chunk);

/* Without the GIL, for a chunk nobody else references: its memory goes back now and the
   chunk is left empty (the object itself is released later, with the GIL). */
void bw_chunk_give_back(bw_chunk_object *chunk);

/* Adds Chunk. 0, or -1 with an exception set. */
int bw_chunk_add_to_module(PyObject *module);
/* Adds the memory accounting hooks to the test hooks' namespace. 0, or -1. */
int bw_chunk_add_test_hooks(PyObject *testing);
#endif
