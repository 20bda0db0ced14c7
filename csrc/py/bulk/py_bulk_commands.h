/* The Python values of the counters, time series and attachment commands (csrc/core/ravendb/
   bulk_commands.h frames them): checked and turned into the plain data the core writes, each
   error naming the argument. */
#ifndef BW_PY_BULK_COMMANDS_H
#define BW_PY_BULK_COMMANDS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include "out_buffer.h"

/* 0, or -1 with an exception set. */
int bw_bulk_commands_init(void);
/* The UTF-8 text of a str argument (borrowed from it); NULL with TypeError or
   UnicodeEncodeError (a lone surrogate) naming `what`. */
const char *bw_command_text(PyObject *text, const char *what, Py_ssize_t *len);
/* A counter's delta: an int (not a bool) within 64 bits. 0, or -1 with an exception set. */
int bw_counter_delta(PyObject *delta, int64_t *value);
/* The Unix time in milliseconds of a datetime (naive ones are UTC), exactly as
   int(timestamp.timestamp() * 1000) gives it. 0, or -1 with an exception set. */
int bw_timestamp_unix_ms(PyObject *timestamp, int64_t *ms);
/* Appends ",<value>" for each of values (a list or tuple of ints, finite floats and None).
   0, or -1 with an exception set (what was appended stays: the caller rolls back). */
int bw_series_values(bw_buf *out, PyObject *values);
#endif
