/* Files read with positioned reads (binding layer; knows Python): the file argument of the
   page reader's functions, and _core.read_ranges. */
#ifndef BW_PY_FILE_READ_H
#define BW_PY_FILE_READ_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A file argument: an object exporting a buffer (the whole file in memory), or a tuple
   (fd, size): an open descriptor, read with pread, and the file's size when it was opened. */
typedef struct {
    Py_buffer view; /* view.obj is NULL when the file is read through fd */
    const uint8_t *data; /* the buffer, or NULL */
    int fd;
    size_t size;
} bw_file_arg;

/* Fills *file from arg. 0, or -1 with an exception set (nothing to release then). */
int bw_file_arg_get(PyObject *arg, bw_file_arg *file);

/* Releases what bw_file_arg_get took. */
void bw_file_arg_release(bw_file_arg *file);

/* Sets the exception of a failed bw_read_exact (rc BW_READ_SHORT: ValueError, the file
   changed; BW_READ_FAILED: OSError) with its message; returns NULL. */
PyObject *bw_raise_read_error(int rc, const char *error);

/* Adds read_ranges. 0, or -1 with an exception set. */
int bw_file_read_add_to_module(PyObject *module);
#endif
