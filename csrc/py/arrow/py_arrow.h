/* Arrow PyCapsule interface (__arrow_c_array__ / __arrow_c_stream__) on the consumer side,
   without importing pyarrow: the one import path of every Arrow consumer in bulkwire
   (VectorCodec, encode_batch). Binding layer: it knows Python; the structs it yields are
   read with arrow_c.h, which does not.

   Usage (GIL held for open/next/close; the array's memory may be read without the GIL):

       bw_arrow_source src;
       if (bw_arrow_source_open(obj, &src) < 0) return error;   // exception set
       int rc;
       while ((rc = bw_arrow_source_next(&src)) == 1) {
           ... read src.schema and src.array (e.g. bw_arrow_vectors_view) ...
       }
       bw_arrow_source_close(&src);                               // always, also after errors
       if (rc < 0) return error;

   The structs are moved out of their capsules, so this source owns them and close() calls
   every release callback exactly once, on every path. Every array that next() hands out has
   passed bw_arrow_validate against the schema (a malformed one raises ValueError naming the
   column and the problem). Release callbacks run with any pending exception set aside, so a
   producer whose callback runs Python cannot lose it. */
#ifndef BW_PY_ARROW_H
#define BW_PY_ARROW_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "arrow_c.h"

typedef struct {
    struct ArrowSchema schema;      /* owned; the type of every array */
    struct ArrowArray array;        /* owned; the current array (release == NULL: none) */
    struct ArrowArrayStream stream; /* owned when is_stream */
    int is_stream;
    int pending;                    /* single array not yet handed out by next() */
} bw_arrow_source;

/* 1 when obj's type has __arrow_c_array__ or __arrow_c_stream__, else 0. Never raises. */
int bw_arrow_source_check(PyObject *obj);

/* Imports obj, preferring __arrow_c_array__ (one array), else __arrow_c_stream__ (looked up
   like any attribute). 0, or -1 with an exception set (and nothing left to close). */
int bw_arrow_source_open(PyObject *obj, bw_arrow_source *src);

/* Moves to the next array (releasing the previous one) and validates it: 1 when src->array
   holds it, 0 at the end, -1 with an exception set. */
int bw_arrow_source_next(bw_arrow_source *src);

/* Moves the current array out into *out (the caller then owns it: release it with
   bw_arrow_release_array), so that several arrays can be held at once. */
void bw_arrow_source_take(bw_arrow_source *src, struct ArrowArray *out);

/* Releases everything still held. Safe to call twice. Does not touch the exception state. */
void bw_arrow_source_close(bw_arrow_source *src);

/* Calls a->release when set, and clears it, with the exception state kept as it was (GIL
   held). */
void bw_arrow_release_array(struct ArrowArray *a);
#endif
