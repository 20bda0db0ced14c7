/* Positioned reads of a file that may change under the reader: exact bytes at any offset,
   a file cut short is BW_READ_SHORT (never a crash, never fewer bytes passed off as the
   whole), a failing descriptor is BW_READ_FAILED, and every error says what happened.
   sources: file_read.c status.c */
#define _POSIX_C_SOURCE 200809L /* fileno, ftruncate, pipe */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "file_read.h"

#define FILE_BYTES 10000

/* A temporary file of FILE_BYTES bytes, byte i being (i * 7) & 0xff; its descriptor. */
static int make_file(void) {
    FILE *f = tmpfile();
    if (f == NULL)
        return -1;
    for (int i = 0; i < FILE_BYTES; i++)
        fputc((i * 7) & 0xff, f);
    fflush(f);
    int fd = dup(fileno(f));
    fclose(f); /* the dup keeps the (unlinked) file open */
    return fd;
}

TEST(reads_the_bytes_at_every_offset_and_length) {
    int fd = make_file();
    CHECK(fd >= 0);
    uint8_t out[FILE_BYTES];
    char error[256] = "";
    const size_t offsets[] = {0, 1, 4095, 4096, 9000, FILE_BYTES - 1, FILE_BYTES};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        size_t length = FILE_BYTES - offsets[k];
        memset(out, 0xee, sizeof out);
        CHECK_EQ(bw_read_exact(fd, out, length, offsets[k], FILE_BYTES, error, sizeof error),
                 BW_READ_OK);
        for (size_t i = 0; i < length; i++)
            CHECK_EQ(out[i], (uint8_t)(((offsets[k] + i) * 7) & 0xff));
    }
    close(fd);
}

TEST(a_file_cut_short_is_a_short_read_that_says_so) {
    int fd = make_file();
    CHECK(fd >= 0);
    CHECK_EQ(ftruncate(fd, 5000), 0);
    uint8_t out[FILE_BYTES];
    char error[256] = "";
    CHECK_EQ(bw_read_exact(fd, out, 100, 4950, FILE_BYTES, error, sizeof error), BW_READ_SHORT);
    CHECK(strstr(error, "changed since it was opened") != NULL);
    CHECK(strstr(error, "10000") != NULL); /* the size it had when opened */
    /* what still lies before the cut is read as before */
    CHECK_EQ(bw_read_exact(fd, out, 100, 4900, FILE_BYTES, error, sizeof error), BW_READ_OK);
    CHECK_EQ(bw_read_exact(fd, out, 1, 5000, FILE_BYTES, error, sizeof error), BW_READ_SHORT);
    close(fd);
}

TEST(a_descriptor_that_cannot_be_read_fails_naming_why) {
    uint8_t out[16];
    char error[256] = "";
    int fd = make_file();
    CHECK(fd >= 0);
    close(fd); /* now a closed descriptor */
    CHECK_EQ(bw_read_exact(fd, out, 16, 0, 16, error, sizeof error), BW_READ_FAILED);
    CHECK(strstr(error, "cannot read 16 bytes at 0") != NULL);
    int ends[2];
    CHECK_EQ(pipe(ends), 0); /* a pipe has no positions */
    error[0] = '\0';
    CHECK_EQ(bw_read_exact(ends[0], out, 16, 0, 16, error, sizeof error), BW_READ_FAILED);
    CHECK(strstr(error, "cannot read") != NULL);
    close(ends[0]);
    close(ends[1]);
    int dir = open(".", O_RDONLY);
    CHECK(dir >= 0);
    CHECK_EQ(bw_read_exact(dir, out, 16, 0, 16, error, sizeof error), BW_READ_FAILED);
    close(dir);
}

TEST(offsets_past_any_file_are_refused_before_reading) {
    int fd = make_file();
    CHECK(fd >= 0);
    uint8_t out[16];
    char error[256] = "";
    CHECK_EQ(bw_read_exact(fd, out, 16, UINT64_MAX - 8, FILE_BYTES, error, sizeof error),
             BW_READ_FAILED);
    CHECK(strstr(error, "past any file's end") != NULL);
    CHECK_EQ(bw_read_exact(fd, out, 16, (uint64_t)INT64_MAX, FILE_BYTES, error, sizeof error),
             BW_READ_FAILED);
    /* a read of nothing anywhere inside the file is fine */
    CHECK_EQ(bw_read_exact(fd, out, 0, FILE_BYTES, FILE_BYTES, error, sizeof error), BW_READ_OK);
    close(fd);
}

RUN_TESTS(reads_the_bytes_at_every_offset_and_length,
          a_file_cut_short_is_a_short_read_that_says_so,
          a_descriptor_that_cannot_be_read_fails_naming_why,
          offsets_past_any_file_are_refused_before_reading)
