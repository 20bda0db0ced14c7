/* Arrow record batch -> bulk insert commands: the encode_batch function, and the batch job
   that it and CommandWriter.put_batch share (one planner, one validator, one encode loop
   that cuts the output where the size threshold is passed). */
#ifndef BW_PY_ENCODE_BATCH_H
#define BW_PY_ENCODE_BATCH_H
#include <Python.h>

#include <stdint.h>

#include "out_buffer.h"

/* A batch imported through the Arrow PyCapsule interface, planned and validated whole. */
typedef struct bw_batch_job bw_batch_job;

/* Reads (batch, id_column, fields, *, vector_column=None, id_prefix='', metadata=b'{}',
   float32='widen', dim=-1, row_base=0) as encode_batch documents them, imports the batch
   (a record batch, or a stream of them) and validates every row before anything is written:
   a bad row raises bulkwire.errors.RowError naming its column and row (row_base + its index).
   The job, or NULL with an exception set. GIL held. */
bw_batch_job *bw_batch_job_open(PyObject *args, PyObject *kwargs);
/* Releases the batch's Arrow memory. NULL is fine. GIL held. */
void bw_batch_job_free(bw_batch_job *job);
/* Rows of the job. */
int64_t bw_batch_job_rows(const bw_batch_job *job);

/* Called, with the GIL, each time `out` holds more than the threshold: it takes the buffer's
   content away (leaving `out` ready for more). 1 go on, 0 stop (nothing more is written),
   -1 with an exception set. */
typedef int (*bw_batch_sink)(void *ctx, bw_buf *out);

/* Appends the commands of every row to `out`, joined by ',' (a ',' before the first too
   unless `first`), with the GIL released while it writes; `full` gets the buffer each time it
   passes `threshold` bytes. Returns 1 (done: what is left stays in `out`), 0 (the sink said
   stop) or -1 with an exception set (MemoryError, or the sink's). GIL held on entry. */
int bw_batch_job_write(bw_batch_job *job, bw_buf *out, int first, size_t threshold,
                       bw_batch_sink full, void *ctx);

/* Writes the text of every row ahead, with the GIL released, into buffers of the writers'
   pool (buffer_pool.h), cut where bw_batch_job_write cuts at `threshold`, the first starting
   with ',' (a writer that has no command yet makes it '['). The job owns them until
   bw_batch_job_take_text; bw_batch_job_free gives back those not taken. 0, or -1 with
   MemoryError set (no buffer kept). GIL held on entry. */
int bw_batch_job_write_ahead(bw_batch_job *job, size_t threshold);
/* Buffers of text written ahead (0: none: the writer writes the rows itself). */
size_t bw_batch_job_text_count(const bw_batch_job *job);
/* Takes text buffer i (i < bw_batch_job_text_count) from the job: its memory (NULL when
   taken before), length and allocated size; the caller owns it (a piece of the body, or
   bw_pool_release). */
char *bw_batch_job_take_text(bw_batch_job *job, size_t i, size_t *len, size_t *cap);
/* Gives back to the pool the text buffers not taken, and forgets the text: a later
   put_batch of the job writes its rows itself. */
void bw_batch_job_drop_text(bw_batch_job *job);

/* The job of a PreparedBatch (prepare_batch's result; the object owns it), or NULL with
   TypeError when `prepared` is something else. */
bw_batch_job *bw_prepared_batch_job(PyObject *prepared);

/* Adds encode_batch, prepare_batch and PreparedBatch (Arrow record batch -> bulk insert commands) to the module. */
int bw_encode_batch_add_to_module(PyObject *module);
/* Adds batch_text_memory to bulkwire._core._testing. 0, or -1 with an exception set. */
int bw_encode_batch_add_test_hooks(PyObject *testing);
#endif
