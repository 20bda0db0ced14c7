/* How a finished output buffer becomes a Python bytes object. Small outputs are copied out
   of the caller's reusable scratch buffer; an output that outgrows BW_OUT_BYTES_FROM moves
   once into a bytes object that then grows in place and becomes the result itself, so a
   large output is neither written twice nor faulted in twice. Binding layer; GIL held. */
#ifndef BW_PY_OUT_BYTES_H
#define BW_PY_OUT_BYTES_H
#include <Python.h>

#include "out_buffer.h"

/* Outputs up to this size stay in the scratch buffer and are copied at the end. */
#define BW_OUT_BYTES_FROM ((size_t)1 << 20)

/* Starts an output in buf (an initialised, empty or reused scratch buffer). */
void bw_out_bytes_begin(bw_buf *buf);
/* New reference: the output as bytes, or NULL with an exception. Afterwards buf is either
   the same scratch buffer (small output) or empty with no memory (data NULL), ready for
   bw_buf_init again; its growth hook is cleared. */
PyObject *bw_out_bytes_finish(bw_buf *buf);
/* Error path: drops a bytes object the output had moved into; buf as after finish. */
void bw_out_bytes_abandon(bw_buf *buf);
#endif
