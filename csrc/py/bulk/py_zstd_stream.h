/* ZstdStream and ZstdDecoder: the binding of the core zstd stream (zstd_stream.c). */
#ifndef BW_PY_ZSTD_STREAM_H
#define BW_PY_ZSTD_STREAM_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_guard.h"

#include "zstd_stream.h"

typedef struct {
    PyObject_HEAD
    bw_zstd_stream *zs;
    bw_guard guard; /* busy: a thread is compressing (GIL released), or the pump holds it */
    int finished;   /* the frame was ended */
    int threads;    /* libzstd's workers (1: none) */
} bw_zstd_object;

/* 1 when obj is a ZstdStream (the type has no subclass), known without a lookup. */
int bw_is_zstd_stream(PyObject *obj);

/* New reference: a Piece with what compressing data gave (data may be NULL: nothing), None
   when it gave nothing; finish ends the frame. NULL with an exception set. */
PyObject *bw_zstd_write(bw_zstd_object *self, PyObject *data, int finish);

/* The exception for a failed bw_zs_write (set; returns NULL). */
PyObject *bw_zstd_set_error(bw_zs_result rc, const bw_zstd_stream *zs);

/* Adds ZstdStream, ZstdDecoder, HAVE_ZSTD and ZSTD_LEVEL. 0, or -1 with an exception set. */
int bw_zstd_add_to_module(PyObject *module);
#endif
