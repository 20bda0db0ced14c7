#include "gzip_stream.h"

#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

#ifdef BW_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

struct bw_gzip_stream {
    bw_gz_backend backend;
    int finished;
    size_t total_in, total_out;
    z_stream z;
#ifdef BW_HAVE_ISAL
    struct isal_zstream isal;
    unsigned char *level_buf;
#endif
};

/* Each call feeds at most this much, so that avail_in/avail_out (32-bit) never overflow. */
#define BW_GZ_STEP ((size_t)1 << 30)

int bw_gz_have_isal(void) {
#ifdef BW_HAVE_ISAL
    return 1;
#else
    return 0;
#endif
}

bw_gzip_stream *bw_gz_new(bw_gz_backend backend) {
    bw_gzip_stream *gz = calloc(1, sizeof *gz);
    if (gz == NULL)
        return NULL;
    gz->backend = backend;
    if (backend == BW_GZ_ZLIB) {
        /* windowBits 15 + 16: a gzip wrapper (header and CRC-32/ISIZE trailer) */
        if (deflateInit2(&gz->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(gz);
            return NULL;
        }
        return gz;
    }
#ifdef BW_HAVE_ISAL
    if (backend == BW_GZ_ISAL) {
        gz->level_buf = malloc(ISAL_DEF_LVL1_DEFAULT);
        if (gz->level_buf == NULL) {
            free(gz);
            return NULL;
        }
        isal_deflate_init(&gz->isal);
        gz->isal.level = 1;
        gz->isal.level_buf = gz->level_buf;
        gz->isal.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
        gz->isal.gzip_flag = IGZIP_GZIP;
        return gz;
    }
#endif
    free(gz);
    return NULL;
}

void bw_gz_free(bw_gzip_stream *gz) {
    if (gz == NULL)
        return;
    if (gz->backend == BW_GZ_ZLIB)
        deflateEnd(&gz->z);
#ifdef BW_HAVE_ISAL
    free(gz->level_buf);
#endif
    free(gz);
}

size_t bw_gz_total_in(const bw_gzip_stream *gz) { return gz->total_in; }
size_t bw_gz_total_out(const bw_gzip_stream *gz) { return gz->total_out; }

/* Room for the output of n input bytes plus a flush marker or trailer; grows on demand. */
static int reserve_for(bw_buf *out, size_t n) {
    size_t want = n + n / 1000 + 1024;
    return bw_buf_reserve(out, want < 65536 ? 65536 : want);
}

static bw_gz_result write_zlib(bw_gzip_stream *gz, const unsigned char *data, size_t n,
                               int finish, bw_buf *out) {
    z_stream *z = &gz->z;
    size_t done = 0;
    for (;;) {
        size_t step = n - done < BW_GZ_STEP ? n - done : BW_GZ_STEP;
        int last = done + step == n;
        int flush = last ? (finish ? Z_FINISH : Z_SYNC_FLUSH) : Z_NO_FLUSH;
        z->next_in = (Bytef *)(data + done);
        z->avail_in = (uInt)step;
        int rc;
        do {
            if (reserve_for(out, step) < 0)
                return BW_GZ_NO_MEMORY;
            size_t room = out->cap - out->len;
            if (room > UINT_MAX)
                room = UINT_MAX;
            z->next_out = (Bytef *)bw_buf_tail(out);
            z->avail_out = (uInt)room;
            rc = deflate(z, flush);
            out->len += room - z->avail_out;
            if (rc == Z_STREAM_ERROR)
                return BW_GZ_COMPRESSOR_FAILED;
            /* a full output buffer may hide more pending output: go round again */
        } while (z->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
        done += step;
        if (last)
            return BW_GZ_OK;
    }
}

#ifdef BW_HAVE_ISAL
static bw_gz_result write_isal(bw_gzip_stream *gz, const unsigned char *data, size_t n,
                               int finish, bw_buf *out) {
    struct isal_zstream *s = &gz->isal;
    size_t done = 0;
    for (;;) {
        size_t step = n - done < BW_GZ_STEP ? n - done : BW_GZ_STEP;
        int last = done + step == n;
        s->next_in = (uint8_t *)(data + done);
        s->avail_in = (uint32_t)step;
        s->flush = last ? SYNC_FLUSH : NO_FLUSH;
        s->end_of_stream = last && finish;
        for (;;) {
            if (reserve_for(out, step) < 0)
                return BW_GZ_NO_MEMORY;
            size_t room = out->cap - out->len;
            if (room > UINT32_MAX)
                room = UINT32_MAX;
            s->next_out = (uint8_t *)bw_buf_tail(out);
            s->avail_out = (uint32_t)room;
            if (isal_deflate(s) != COMP_OK)
                return BW_GZ_COMPRESSOR_FAILED;
            out->len += room - s->avail_out;
            if (s->avail_out != 0 && s->avail_in == 0) {
                /* all input taken and the output not full: flushed, or ended when asked */
                if (!s->end_of_stream || s->internal_state.state == ZSTATE_END)
                    break;
            }
        }
        done += step;
        if (last)
            return BW_GZ_OK;
    }
}
#endif

bw_gz_result bw_gz_write(bw_gzip_stream *gz, const void *data, size_t n, int finish,
                         bw_buf *out) {
    if (gz->finished)
        return BW_GZ_ALREADY_FINISHED;
    size_t before = out->len;
    bw_gz_result rc;
#ifdef BW_HAVE_ISAL
    if (gz->backend == BW_GZ_ISAL)
        rc = write_isal(gz, data, n, finish, out);
    else
#endif
        rc = write_zlib(gz, data, n, finish, out);
    if (rc == BW_GZ_OK) {
        gz->total_in += n;
        gz->total_out += out->len - before;
        if (finish)
            gz->finished = 1;
    }
    return rc;
}
