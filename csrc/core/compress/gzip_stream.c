#include "gzip_stream.h"

#include "deflate_commas.h"
#include "fork_origin.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#ifdef BW_HAVE_ISAL
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#endif

/* Deflate's window: each block of a parallel stream is primed with this much input before it. */
#define BW_GZ_WINDOW ((size_t)32 << 10)

/* How a parallel stream codes a block. The backend's matcher (LZ77 and Huffman) pays for
   itself on text that repeats, as JSON keys do; on float digits it finds little and costs
   about 23 instructions per byte, while the comma coder (deflate_commas.h) codes the same
   text to about the same size in a few. So a block is sampled now and then: matched, and the
   comma block's size computed beside it; the blocks until the next sample are comma blocks
   when that size was within 1/COMMAS_SLACK of the matched one. */
typedef enum {
    BLOCK_MATCHED = 0,
    BLOCK_COMMAS = 1,
    BLOCK_SAMPLED = 2, /* matched, and its comma block's size measured */
} block_kind;
/* A block is sampled once every SAMPLE_EVERY blocks, the first block included. */
#define SAMPLE_EVERY 16
/* Comma blocks may be up to 1/COMMAS_SLACK larger than the matched ones (3%). */
#define COMMAS_SLACK 32
/* Blocks shorter than a whole parallel block are always matched: a comma block's header (its
   codes, up to about 200 bytes) would weigh on them, and a small write after a large one is
   where the matcher's primed window pays (a repeat of earlier text). */
#define COMMAS_MIN BW_GZ_BLOCK_MIN
/* Blocks longer than this are always matched too: a comma block's match list takes up to 8
   bytes per 3 bytes of block (about 0.4 on float arrays), which stays bounded this way. */
#define COMMAS_MAX ((size_t)16 << 20)

/* One block's compressor in a parallel stream, used by one thread at a time: the job (dict,
   data), then the result (out, crc, rc). */
typedef struct {
    bw_gz_backend backend;
    z_stream z;
    int z_ready;
#ifdef BW_HAVE_ISAL
    struct isal_zstream isal;
    unsigned char *level_buf;
#endif
    const unsigned char *dict, *data;
    size_t dict_len, n;
    block_kind kind;
    bw_buf out;
    unsigned long crc;
    size_t comma_size; /* a sampled block's: what its comma block would have taken */
    bw_comma_code commas; /* its codes and match list, kept from block to block */
    bw_gz_result rc;
} gz_block_worker;

/* The helper threads of a parallel stream, started on its first write of more than one block
   and kept until bw_gz_free. A write posts a wave of blocks; the writing thread and the
   helpers claim them one by one, and the writer waits only for blocks a helper has claimed:
   a helper the scheduler has not run yet (a busy machine) costs nothing, the writer deflates
   its blocks itself. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t posted;   /* a wave was posted, or stop */
    pthread_cond_t finished; /* a helper finished its block */
    pthread_t ids[BW_GZ_THREADS_MAX];
    int helpers;             /* threads started */
    int tried;               /* helpers were asked for (started or not) */
    gz_block_worker *blocks;
    int count, next;         /* blocks in the wave; the next unclaimed one */
    int running;             /* blocks helpers claimed and have not finished */
    int stop;
} gz_pool;

struct bw_gzip_stream {
    bw_gz_backend backend;
    int finished;
    size_t total_in, total_out;
    z_stream z;
#ifdef BW_HAVE_ISAL
    struct isal_zstream isal;
    unsigned char *level_buf;
#endif
    /* parallel streams only (threads > 0) */
    int threads;
    gz_block_worker *workers;
    gz_pool pool;
    int pool_ready; /* its mutex and conditions exist */
    bw_origin origin; /* the process that made it (its helpers are that process's) */
    int header_written;
    unsigned long crc;
    unsigned char history[BW_GZ_WINDOW]; /* the last input, the next write's first dictionary */
    size_t history_len;
    int commas;          /* the last sample chose comma blocks */
    int until_sample;    /* blocks before the next sample */
    size_t comma_blocks; /* blocks written as comma blocks so far */
};

static void pool_stop(gz_pool *pool);

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

static void worker_free(gz_block_worker *w) {
    bw_comma_code_free(&w->commas);
    if (w->z_ready)
        deflateEnd(&w->z);
#ifdef BW_HAVE_ISAL
    free(w->level_buf);
#endif
    bw_buf_free(&w->out);
}

/* 0, or -1 when the compressor cannot start (out of memory, or the backend is missing). */
static int worker_init(gz_block_worker *w, bw_gz_backend backend) {
    w->backend = backend;
    if (backend == BW_GZ_ZLIB) {
        /* windowBits -15: raw deflate, the member's header and trailer are the stream's */
        if (deflateInit2(&w->z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return -1;
        w->z_ready = 1;
        return 0;
    }
#ifdef BW_HAVE_ISAL
    if (backend == BW_GZ_ISAL) {
        w->level_buf = malloc(ISAL_DEF_LVL1_DEFAULT);
        if (w->level_buf == NULL)
            return -1;
        isal_deflate_init(&w->isal);
        return 0;
    }
#endif
    return -1;
}

bw_gzip_stream *bw_gz_new_parallel(bw_gz_backend backend, int threads) {
    if (backend != BW_GZ_ZLIB && !(backend == BW_GZ_ISAL && bw_gz_have_isal()))
        return NULL;
    if (threads < 1)
        threads = 1;
    if (threads > BW_GZ_THREADS_MAX)
        threads = BW_GZ_THREADS_MAX;
    bw_gzip_stream *gz = calloc(1, sizeof *gz);
    if (gz == NULL)
        return NULL;
    gz->backend = backend;
    gz->workers = calloc((size_t)threads, sizeof *gz->workers);
    if (gz->workers == NULL) {
        free(gz);
        return NULL;
    }
    gz->threads = threads; /* set first: bw_gz_free frees every worker */
    bw_origin_record(&gz->origin);
    if (pthread_mutex_init(&gz->pool.mu, NULL) != 0) {
        free(gz->workers);
        free(gz);
        return NULL;
    }
    if (pthread_cond_init(&gz->pool.posted, NULL) != 0) {
        pthread_mutex_destroy(&gz->pool.mu);
        free(gz->workers);
        free(gz);
        return NULL;
    }
    if (pthread_cond_init(&gz->pool.finished, NULL) != 0) {
        pthread_cond_destroy(&gz->pool.posted);
        pthread_mutex_destroy(&gz->pool.mu);
        free(gz->workers);
        free(gz);
        return NULL;
    }
    gz->pool_ready = 1;
    for (int i = 0; i < threads; i++) {
        if (worker_init(&gz->workers[i], backend) < 0) {
            bw_gz_free(gz);
            return NULL;
        }
    }
    return gz;
}

int bw_gz_inherited(const bw_gzip_stream *gz) {
    return gz->threads > 0 && bw_origin_inherited(&gz->origin);
}

int bw_gz_threads(const bw_gzip_stream *gz) { return gz->threads > 0 ? gz->threads : 1; }

void bw_gz_free(bw_gzip_stream *gz) {
    if (gz == NULL)
        return;
    if (gz->threads > 0) {
        /* in a forked child the helpers do not exist and their lock may be held */
        if (gz->pool_ready && !bw_gz_inherited(gz))
            pool_stop(&gz->pool);
        for (int i = 0; i < gz->threads; i++)
            worker_free(&gz->workers[i]);
        free(gz->workers);
        free(gz);
        return;
    }
    if (gz->backend == BW_GZ_ZLIB)
        deflateEnd(&gz->z);
#ifdef BW_HAVE_ISAL
    free(gz->level_buf);
#endif
    free(gz);
}

size_t bw_gz_total_in(const bw_gzip_stream *gz) { return gz->total_in; }
size_t bw_gz_total_out(const bw_gzip_stream *gz) { return gz->total_out; }
size_t bw_gz_comma_blocks(const bw_gzip_stream *gz) { return gz->comma_blocks; }

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

/* ---- parallel streams: blocks deflated at once, joined into one member ---- */

int bw_gz_put_header(bw_buf *out) {
    /* no name, no time; XFL 4 (fastest), OS 3 (Unix), as zlib writes at level 1 */
    static const unsigned char header[BW_GZ_HEADER_LEN] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3};
    return bw_buf_append(out, header, sizeof header);
}

int bw_gz_put_end(bw_buf *out, unsigned long crc, unsigned long long total_in) {
    unsigned char end[BW_GZ_END_LEN];
    /* BFINAL=1, BTYPE=01 (fixed Huffman), then the end-of-block code (seven 0 bits): it can
       follow only a byte-aligned (sync-flushed) block */
    end[0] = 0x03;
    end[1] = 0x00;
    for (int i = 0; i < 4; i++) {
        end[2 + i] = (unsigned char)(crc >> (8 * i));
        end[6 + i] = (unsigned char)(total_in >> (8 * i)); /* ISIZE: the length mod 2^32 */
    }
    return bw_buf_append(out, end, sizeof end);
}

unsigned long bw_gz_crc_combine(unsigned long crc1, unsigned long crc2, size_t len2) {
    return crc32_combine(crc1, crc2, (z_off_t)len2);
}

/* The CRC-32 of a block's input, by the backend's own routine (ISA-L's is the faster). */
static unsigned long block_crc(const gz_block_worker *w) {
#ifdef BW_HAVE_ISAL
    if (w->backend == BW_GZ_ISAL)
        return crc32_gzip_refl(0, w->data, (uint64_t)w->n);
#endif
    return crc32(0, w->data, (uInt)w->n);
}

/* One block as a comma block (no dictionary: it refers only to its own bytes), sync-flushed,
   into w->out; its CRC-32 in w->crc. */
static bw_gz_result block_commas(gz_block_worker *w) {
    if (bw_comma_code_make(w->data, w->n, &w->commas) < 0 ||
        bw_comma_block_write(&w->commas, w->data, w->n, &w->out) < 0)
        return BW_GZ_NO_MEMORY;
    w->crc = block_crc(w);
    return BW_GZ_OK;
}

/* One block as raw deflate primed with its dictionary, sync-flushed, into w->out; its CRC-32
   in w->crc. n is at most BW_GZ_STEP. */
static bw_gz_result block_zlib(gz_block_worker *w) {
    z_stream *z = &w->z;
    if (deflateReset(z) != Z_OK)
        return BW_GZ_COMPRESSOR_FAILED;
    if (w->dict_len > 0 && deflateSetDictionary(z, w->dict, (uInt)w->dict_len) != Z_OK)
        return BW_GZ_COMPRESSOR_FAILED;
    z->next_in = (Bytef *)w->data;
    z->avail_in = (uInt)w->n;
    do {
        if (reserve_for(&w->out, z->avail_in) < 0)
            return BW_GZ_NO_MEMORY;
        size_t room = w->out.cap - w->out.len;
        if (room > UINT_MAX)
            room = UINT_MAX;
        z->next_out = (Bytef *)bw_buf_tail(&w->out);
        z->avail_out = (uInt)room;
        int rc = deflate(z, Z_SYNC_FLUSH);
        w->out.len += room - z->avail_out;
        if (rc == Z_STREAM_ERROR)
            return BW_GZ_COMPRESSOR_FAILED;
    } while (z->avail_out == 0); /* a full output buffer may hide more pending output */
    w->crc = block_crc(w);
    return BW_GZ_OK;
}

#ifdef BW_HAVE_ISAL
static bw_gz_result block_isal(gz_block_worker *w) {
    struct isal_zstream *s = &w->isal;
    isal_deflate_init(s);
    s->level = 1;
    s->level_buf = w->level_buf;
    s->level_buf_size = ISAL_DEF_LVL1_DEFAULT;
    s->gzip_flag = IGZIP_DEFLATE;
    s->flush = SYNC_FLUSH;
    s->end_of_stream = 0;
    if (w->dict_len > 0 &&
        isal_deflate_set_dict(s, (uint8_t *)w->dict, (uint32_t)w->dict_len) != COMP_OK)
        return BW_GZ_COMPRESSOR_FAILED;
    s->next_in = (uint8_t *)w->data;
    s->avail_in = (uint32_t)w->n;
    do {
        if (reserve_for(&w->out, s->avail_in) < 0)
            return BW_GZ_NO_MEMORY;
        size_t room = w->out.cap - w->out.len;
        if (room > UINT32_MAX)
            room = UINT32_MAX;
        s->next_out = (uint8_t *)bw_buf_tail(&w->out);
        s->avail_out = (uint32_t)room;
        if (isal_deflate(s) != COMP_OK)
            return BW_GZ_COMPRESSOR_FAILED;
        w->out.len += room - s->avail_out;
    } while (s->avail_out == 0 || s->avail_in != 0); /* not yet all taken and flushed */
    w->crc = block_crc(w);
    return BW_GZ_OK;
}
#endif

static void *block_run(void *arg) {
    gz_block_worker *w = arg;
    w->out.len = 0;
    if (w->kind == BLOCK_COMMAS) {
        w->rc = block_commas(w);
        return NULL;
    }
#ifdef BW_HAVE_ISAL
    if (w->backend == BW_GZ_ISAL)
        w->rc = block_isal(w);
    else
#endif
        w->rc = block_zlib(w);
    if (w->rc == BW_GZ_OK && w->kind == BLOCK_SAMPLED) {
        if (bw_comma_code_make(w->data, w->n, &w->commas) < 0)
            w->rc = BW_GZ_NO_MEMORY;
        else
            w->comma_size = bw_comma_block_size(&w->commas);
    }
    return NULL;
}

/* A helper: claims and deflates the posted blocks until stopped. */
static void *pool_helper(void *arg) {
    gz_pool *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->next >= pool->count)
            pthread_cond_wait(&pool->posted, &pool->mu);
        if (pool->stop)
            break;
        gz_block_worker *w = &pool->blocks[pool->next++];
        pool->running++;
        pthread_mutex_unlock(&pool->mu);
        block_run(w);
        pthread_mutex_lock(&pool->mu);
        if (--pool->running == 0)
            pthread_cond_broadcast(&pool->finished);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

static void pool_stop(gz_pool *pool) {
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->posted);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->helpers; i++)
        pthread_join(pool->ids[i], NULL);
    pthread_cond_destroy(&pool->finished);
    pthread_cond_destroy(&pool->posted);
    pthread_mutex_destroy(&pool->mu);
}

/* Deflates gz->workers[0..count): posts them to the helpers (started on the first wave; none
   to be had is no error, this thread then does it all), claims blocks itself until none is
   left, then waits for those the helpers claimed. */
static void pool_run_wave(bw_gzip_stream *gz, int count) {
    gz_pool *pool = &gz->pool;
    if (count > 1 && !pool->tried) {
        pool->tried = 1;
        for (int i = 0; i < gz->threads - 1; i++) {
            if (pthread_create(&pool->ids[pool->helpers], NULL, pool_helper, pool) != 0)
                break;
            pool->helpers++;
        }
    }
    pthread_mutex_lock(&pool->mu);
    pool->blocks = gz->workers;
    pool->count = count;
    pool->next = 0;
    if (count > 1)
        pthread_cond_broadcast(&pool->posted);
    while (pool->next < pool->count) {
        gz_block_worker *w = &pool->blocks[pool->next++];
        pthread_mutex_unlock(&pool->mu);
        block_run(w);
        pthread_mutex_lock(&pool->mu);
    }
    while (pool->running > 0)
        pthread_cond_wait(&pool->finished, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

/* The block length for a write of n bytes: one block per thread, within the bounds. */
static size_t block_length(size_t n, int threads) {
    size_t block = n / (size_t)threads + (n % (size_t)threads != 0);
    if (block < BW_GZ_BLOCK_MIN)
        block = BW_GZ_BLOCK_MIN;
    return block < BW_GZ_STEP ? block : BW_GZ_STEP;
}

/* How the next block, of n bytes, is coded (see block_kind). */
static block_kind next_block_kind(bw_gzip_stream *gz, size_t n) {
    if (n < COMMAS_MIN || n > COMMAS_MAX)
        return BLOCK_MATCHED;
    if (gz->until_sample == 0) {
        gz->until_sample = SAMPLE_EVERY - 1;
        return BLOCK_SAMPLED;
    }
    gz->until_sample--;
    return gz->commas ? BLOCK_COMMAS : BLOCK_MATCHED;
}

/* The last BW_GZ_WINDOW bytes of all input so far, after data[0..n) was written. */
static void remember_history(bw_gzip_stream *gz, const unsigned char *data, size_t n) {
    if (n == 0) /* data may be NULL */
        return;
    if (n >= BW_GZ_WINDOW) {
        memcpy(gz->history, data + n - BW_GZ_WINDOW, BW_GZ_WINDOW);
        gz->history_len = BW_GZ_WINDOW;
        return;
    }
    size_t keep = gz->history_len + n > BW_GZ_WINDOW ? BW_GZ_WINDOW - n : gz->history_len;
    memmove(gz->history, gz->history + gz->history_len - keep, keep);
    memcpy(gz->history + keep, data, n);
    gz->history_len = keep + n;
}

/* Deflates the blocks of data[0..n) in waves of up to gz->threads at once and appends them in
   order. Every started thread is joined before it returns, error or not. */
static bw_gz_result write_parallel(bw_gzip_stream *gz, const unsigned char *data, size_t n,
                                   int finish, bw_buf *out) {
    if (!gz->header_written) {
        if (bw_gz_put_header(out) < 0)
            return BW_GZ_NO_MEMORY;
        gz->header_written = 1;
    }
    size_t block = block_length(n, gz->threads);
    size_t done = 0;
    while (done < n) {
        int count = 0;
        for (; count < gz->threads && done < n; count++) {
            gz_block_worker *w = &gz->workers[count];
            w->data = data + done;
            w->n = n - done < block ? n - done : block;
            if (done == 0) { /* primed with the previous writes' tail */
                w->dict = gz->history;
                w->dict_len = gz->history_len;
            } else { /* block >= BW_GZ_WINDOW: the window lies inside this write */
                w->dict = data + done - BW_GZ_WINDOW;
                w->dict_len = BW_GZ_WINDOW;
            }
            w->kind = next_block_kind(gz, w->n);
            done += w->n;
        }
        pool_run_wave(gz, count);
        for (int i = 0; i < count; i++) {
            gz_block_worker *w = &gz->workers[i];
            if (w->rc != BW_GZ_OK)
                return w->rc;
            if (w->kind == BLOCK_SAMPLED)
                gz->commas = w->comma_size <= w->out.len + w->out.len / COMMAS_SLACK;
            gz->comma_blocks += w->kind == BLOCK_COMMAS;
            if (bw_buf_append(out, w->out.data, w->out.len) < 0)
                return BW_GZ_NO_MEMORY;
            gz->crc = bw_gz_crc_combine(gz->crc, w->crc, w->n);
        }
    }
    remember_history(gz, data, n);
    if (finish && bw_gz_put_end(out, gz->crc, (unsigned long long)(gz->total_in + n)) < 0)
        return BW_GZ_NO_MEMORY;
    return BW_GZ_OK;
}

bw_gz_result bw_gz_write(bw_gzip_stream *gz, const void *data, size_t n, int finish,
                         bw_buf *out) {
    if (gz->finished)
        return BW_GZ_ALREADY_FINISHED;
    if (bw_gz_inherited(gz))
        return BW_GZ_INHERITED;
    size_t before = out->len;
    bw_gz_result rc;
    if (gz->threads > 0)
        rc = write_parallel(gz, data, n, finish, out);
    else
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

int bw_gz_status(bw_gz_result rc, bw_status *st) {
    if (rc == BW_GZ_NO_MEMORY)
        return bw_status_set(st, BW_STATUS_NO_MEMORY, 0, "out of memory");
    return bw_status_set(st, BW_STATUS_FAILED, 0, "the deflate stream failed");
}
