/* Reading a file that may change under the reader, without Python: positioned reads
   (pread) into the caller's memory. A memory map of the file would turn the first access
   past a new, shorter end into SIGBUS, which kills the process; a read returns fewer bytes
   instead, which is reported as an error naming what happened. Core layer: no Python, no
   GIL (the binding calls it with the GIL released). */
#ifndef BW_FILE_READ_H
#define BW_FILE_READ_H
#include <stddef.h>
#include <stdint.h>

#include "status.h"

enum {
    BW_READ_OK = 0,
    BW_READ_SHORT = 1,   /* the file ends before the bytes asked for: it changed */
    BW_READ_FAILED = -1, /* a read failed: an I/O error, a closed descriptor */
};

/* Reads exactly `length` bytes at `offset` of `fd` into `out`, reading again after partial
   reads and EINTR. `file_size` is the file's size when it was opened, for the message.
   BW_READ_SHORT when the file ends sooner (it was cut short, or replaced in place, since);
   BW_READ_FAILED when a read fails. Either way `error` (error_size bytes) says what
   happened. */
int bw_read_exact(int fd, uint8_t *out, size_t length, uint64_t offset, size_t file_size,
                  char *error, size_t error_size);

/* The status of bw_read_exact's result rc (not BW_READ_OK) and its error: a short read is
   BW_STATUS_MALFORMED (the file changed), a failed one BW_STATUS_OS, each with the message.
   Returns -1. */
int bw_read_status(int rc, const char *error, bw_status *st);

#endif
