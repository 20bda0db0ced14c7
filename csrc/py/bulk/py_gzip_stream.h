/* GzipStream: the binding of the core deflate stream (gzip_stream.c). */
#ifndef BW_PY_GZIP_STREAM_H
#define BW_PY_GZIP_STREAM_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_guard.h"

#include "gzip_stream.h"

typedef struct {
    PyObject_HEAD
    bw_gzip_stream *gz;
    bw_gz_backend backend;
    bw_guard guard; /* busy: a thread is deflating (GIL released), or the pump holds it */
    int finished;   /* the member was ended */
} bw_gzip_object;

/* 1 when obj is a GzipStream (the type has no subclass), known without a lookup. */
int bw_is_gzip_stream(PyObject *obj);

/* New reference: a Piece with what deflating data gave (data may be NULL: nothing), None
   when it gave nothing; finish ends the member. NULL with an exception set. */
PyObject *bw_gzip_write(bw_gzip_object *self, PyObject *data, int finish);
/* Sets the RuntimeError of a parallel stream used in a forked child (bw_gz_inherited) and
   returns NULL. */
PyObject *bw_gzip_raise_inherited(void);

/* Adds GzipStream and HAVE_ISAL. 0, or -1 with an exception set. */
int bw_gzip_add_to_module(PyObject *module);
#endif
