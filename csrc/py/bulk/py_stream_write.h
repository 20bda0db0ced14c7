/* The one driver of the core's body compressors (gzip_stream.c, zstd_stream.c) for their
   Python types: the in-use and finished rules, the GIL released while compressing, and the
   output handed over as a Piece. */
#ifndef BW_PY_STREAM_WRITE_H
#define BW_PY_STREAM_WRITE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_guard.h"

#include "out_buffer.h"

/* A core compressor's write: 0 (its OK), or its nonzero error code. */
typedef int (*bw_stream_write_fn)(void *stream, const void *data, size_t n, int finish, bw_buf *out);

/* New reference: a Piece with what compressing data gave (data may be NULL: nothing), None
   when it gave nothing; finish ends the stream. The object's guard (py_guard.h) refuses a
   forked child's copy (inherited: the core's own test) and a call while another is under
   way, with the object's words; *finished: its "the stream was ended" flag (set here on a
   finish). NULL with an exception set: RuntimeError for a copy or a stream in use, ValueError
   for a finished one (kind "gzip", ...); or, when the core failed, NULL with *failure set to
   its code and no exception yet (the caller names the failure). */
PyObject *bw_stream_write(bw_stream_write_fn write, void *stream, bw_guard *guard,
                          const bw_guard_words *words, int inherited, int *finished,
                          const char *kind, PyObject *data, int finish, int *failure);
#endif
