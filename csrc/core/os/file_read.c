/* Positioned reads of a file: see file_read.h. */
#define _POSIX_C_SOURCE 200809L /* pread, the POSIX strerror_r */
#define _FILE_OFFSET_BITS 64
#include "file_read.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* One read asks for at most this much: some systems refuse more than INT_MAX at once. */
#define MAX_READ ((size_t)1 << 30)

int bw_read_exact(int fd, uint8_t *out, size_t length, uint64_t offset, size_t file_size,
                  char *error, size_t error_size) {
    if (length > (uint64_t)INT64_MAX || offset > (uint64_t)INT64_MAX - length) {
        snprintf(error, error_size, "cannot read %zu bytes at %llu: past any file's end",
                 length, (unsigned long long)offset);
        return BW_READ_FAILED;
    }
    size_t done = 0;
    while (done < length) {
        size_t want = length - done < MAX_READ ? length - done : MAX_READ;
        ssize_t got = pread(fd, out + done, want, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            char why[96];
            if (strerror_r(errno, why, sizeof why) != 0)
                snprintf(why, sizeof why, "errno %d", errno);
            snprintf(error, error_size, "cannot read %zu bytes at %llu: %s", length,
                     (unsigned long long)offset, why);
            return BW_READ_FAILED;
        }
        if (got == 0) {
            snprintf(error, error_size, "the file is shorter than its %zu bytes (a read of "
                     "%zu at %llu got %zu): it changed since it was opened", file_size, length,
                     (unsigned long long)offset, done);
            return BW_READ_SHORT;
        }
        done += (size_t)got;
    }
    return BW_READ_OK;
}

int bw_read_status(int rc, const char *error, bw_status *st) {
    return bw_status_set(st, rc == BW_READ_SHORT ? BW_STATUS_MALFORMED : BW_STATUS_OS, 0, "%s",
                         error);
}
