#include "zstd_stream.h"

#include "fork_origin.h"

#include <stdlib.h>

#ifdef BW_HAVE_ZSTD
/* for ZSTD_c_literalCompressionMode: an experimental parameter, but one that the shared
   library takes through the stable ZSTD_CCtx_setParameter (libzstd 1.4.5 and later) */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

/* libzstd 1.5.2 renamed the literal modes (ZSTD_lcm_huffman became ZSTD_ps_enable, the same
   value); older headers still build */
#if ZSTD_VERSION_NUMBER >= 10502
#define BW_ZSTD_HUFFMAN_LITERALS ZSTD_ps_enable
#else
#define BW_ZSTD_HUFFMAN_LITERALS ZSTD_lcm_huffman
#endif

struct bw_zstd_stream {
    ZSTD_CCtx *cctx;
    int threads;      /* libzstd's workers (0: none) */
    bw_origin origin; /* the process that made it: its workers are that process's */
    int finished;
    size_t total_in, total_out;
    size_t last_error;
};

struct bw_zstd_decoder {
    ZSTD_DCtx *dctx;
    int ended;
    int broken;
    size_t last_error;
};

int bw_zs_have_zstd(void) { return 1; }

int bw_zs_min_level(void) { return ZSTD_minCLevel(); }
int bw_zs_max_level(void) { return ZSTD_maxCLevel(); }

bw_zstd_stream *bw_zs_new(int level) { return bw_zs_new_parallel(level, 1); }

bw_zstd_stream *bw_zs_new_parallel(int level, int threads) {
    bw_zstd_stream *zs = calloc(1, sizeof *zs);
    if (zs == NULL)
        return NULL;
    bw_origin_record(&zs->origin);
    zs->cctx = ZSTD_createCCtx();
    /* a checksum lets the receiver tell a damaged body from a short one */
    if (zs->cctx == NULL ||
        ZSTD_isError(ZSTD_CCtx_setParameter(zs->cctx, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(zs->cctx, ZSTD_c_checksumFlag, 1)))
        goto fail;
    /* Negative levels store literals raw by default; float text is mostly literals, which
       Huffman coding shrinks by a third: keep it, and skip only the match search. */
    if (level < 0 && ZSTD_isError(ZSTD_CCtx_setParameter(zs->cctx, ZSTD_c_literalCompressionMode,
                                                         BW_ZSTD_HUFFMAN_LITERALS)))
        goto fail;
    /* libzstd's own workers: still one frame (see zstd_stream.h) */
    if (threads > 1 &&
        (ZSTD_isError(ZSTD_CCtx_setParameter(zs->cctx, ZSTD_c_nbWorkers, threads)) ||
         ZSTD_isError(ZSTD_CCtx_setParameter(zs->cctx, ZSTD_c_jobSize, BW_ZSTD_JOB_SIZE))))
        goto fail;
    zs->threads = threads > 1 ? threads : 0;
    return zs;
fail:
    bw_zs_free(zs);
    return NULL;
}

/* A forked child's copy of a stream with workers: libzstd's context holds the parent's
   worker threads, which the child does not have. */
int bw_zs_inherited(const bw_zstd_stream *zs) {
    return zs->threads > 0 && bw_origin_inherited(&zs->origin);
}

void bw_zs_free(bw_zstd_stream *zs) {
    if (zs == NULL)
        return;
    if (!bw_zs_inherited(zs)) /* the child's copy of the context is left as it is */
        ZSTD_freeCCtx(zs->cctx);
    free(zs);
}

size_t bw_zs_total_in(const bw_zstd_stream *zs) { return zs->total_in; }
size_t bw_zs_total_out(const bw_zstd_stream *zs) { return zs->total_out; }

const char *bw_zs_error_text(const bw_zstd_stream *zs) {
    return ZSTD_getErrorName(zs->last_error);
}

bw_zs_result bw_zs_write(bw_zstd_stream *zs, const void *data, size_t n, int finish, bw_buf *out) {
    if (zs->finished)
        return BW_ZS_ALREADY_FINISHED;
    if (bw_zs_inherited(zs))
        return BW_ZS_INHERITED;
    size_t before = out->len;
    ZSTD_inBuffer in = {data, n, 0};
    ZSTD_EndDirective mode = finish ? ZSTD_e_end : ZSTD_e_flush;
    for (;;) {
        /* room for the whole piece's worst case at once: one round in the common case */
        size_t want = ZSTD_compressBound(n - in.pos) + 64;
        if (bw_buf_reserve(out, want < 65536 ? 65536 : want) < 0)
            return BW_ZS_NO_MEMORY;
        ZSTD_outBuffer dst = {bw_buf_tail(out), out->cap - out->len, 0};
        size_t left = ZSTD_compressStream2(zs->cctx, &dst, &in, mode);
        out->len += dst.pos;
        if (ZSTD_isError(left)) {
            zs->last_error = left;
            return BW_ZS_FAILED;
        }
        if (left == 0 && in.pos == in.size) /* flushed (or ended) and all input taken */
            break;
    }
    zs->total_in += n;
    zs->total_out += out->len - before;
    if (finish)
        zs->finished = 1;
    return BW_ZS_OK;
}

bw_zstd_decoder *bw_zsd_new(void) {
    bw_zstd_decoder *zd = calloc(1, sizeof *zd);
    if (zd == NULL)
        return NULL;
    zd->dctx = ZSTD_createDCtx();
    /* a hostile frame header may not make the decoder allocate more than this window */
    if (zd->dctx == NULL ||
        ZSTD_isError(ZSTD_DCtx_setParameter(zd->dctx, ZSTD_d_windowLogMax, BW_ZSTD_WINDOW_LOG_MAX))) {
        bw_zsd_free(zd);
        return NULL;
    }
    return zd;
}

void bw_zsd_free(bw_zstd_decoder *zd) {
    if (zd == NULL)
        return;
    ZSTD_freeDCtx(zd->dctx);
    free(zd);
}

const char *bw_zsd_error_text(const bw_zstd_decoder *zd) {
    return ZSTD_getErrorName(zd->last_error);
}

bw_zs_result bw_zsd_read(bw_zstd_decoder *zd, const void *in, size_t n, size_t *consumed,
                         void *out, size_t room, size_t *produced, int *ended) {
    *consumed = *produced = 0;
    *ended = zd->ended;
    if (zd->broken)
        return BW_ZS_FAILED;
    if (zd->ended)
        return n > 0 ? BW_ZS_AFTER_END : BW_ZS_OK;
    ZSTD_inBuffer src = {in, n, 0};
    ZSTD_outBuffer dst = {out, room, 0};
    while (dst.pos < dst.size) {
        size_t before_in = src.pos, before_out = dst.pos;
        size_t hint = ZSTD_decompressStream(zd->dctx, &dst, &src);
        if (ZSTD_isError(hint)) {
            zd->last_error = hint;
            zd->broken = 1;
            *consumed = src.pos;
            *produced = dst.pos;
            return BW_ZS_FAILED;
        }
        if (hint == 0) { /* the frame is whole and flushed */
            zd->ended = 1;
            break;
        }
        if (src.pos == before_in && dst.pos == before_out) /* needs more input */
            break;
    }
    *consumed = src.pos;
    *produced = dst.pos;
    *ended = zd->ended;
    if (zd->ended && src.pos < src.size)
        return BW_ZS_AFTER_END;
    return BW_ZS_OK;
}

#else /* built without libzstd: the Python layer uses the zstandard package instead */

int bw_zs_have_zstd(void) { return 0; }
bw_zstd_stream *bw_zs_new(int level) { (void)level; return NULL; }
bw_zstd_stream *bw_zs_new_parallel(int level, int threads) { (void)level, (void)threads; return NULL; }
int bw_zs_min_level(void) { return 0; }
int bw_zs_max_level(void) { return 0; }
void bw_zs_free(bw_zstd_stream *zs) { (void)zs; }
int bw_zs_inherited(const bw_zstd_stream *zs) { (void)zs; return 0; }
size_t bw_zs_total_in(const bw_zstd_stream *zs) { (void)zs; return 0; }
size_t bw_zs_total_out(const bw_zstd_stream *zs) { (void)zs; return 0; }
const char *bw_zs_error_text(const bw_zstd_stream *zs) { (void)zs; return "no libzstd"; }
bw_zs_result bw_zs_write(bw_zstd_stream *zs, const void *data, size_t n, int finish, bw_buf *out) {
    (void)zs, (void)data, (void)n, (void)finish, (void)out;
    return BW_ZS_FAILED;
}
bw_zstd_decoder *bw_zsd_new(void) { return NULL; }
void bw_zsd_free(bw_zstd_decoder *zd) { (void)zd; }
const char *bw_zsd_error_text(const bw_zstd_decoder *zd) { (void)zd; return "no libzstd"; }
bw_zs_result bw_zsd_read(bw_zstd_decoder *zd, const void *in, size_t n, size_t *consumed,
                         void *out, size_t room, size_t *produced, int *ended) {
    (void)zd, (void)in, (void)n, (void)out, (void)room;
    *consumed = *produced = 0;
    *ended = 0;
    return BW_ZS_FAILED;
}
#endif

int bw_zs_status(bw_zs_result rc, const bw_zstd_stream *zs, bw_status *st) {
    if (rc == BW_ZS_NO_MEMORY)
        return bw_status_set(st, BW_STATUS_NO_MEMORY, 0, "out of memory");
    if (rc == BW_ZS_INHERITED)
        return bw_status_inherited(st, "this zstd stream (on several threads)",
                                   "libzstd's worker threads");
    return bw_status_set(st, BW_STATUS_FAILED, 0, "the zstd stream failed: %s",
                         bw_zs_error_text(zs));
}

int bw_zsd_status(const bw_zstd_decoder *zd, bw_status *st) {
    return bw_status_set(st, BW_STATUS_INVALID, 0, "corrupt zstd frame: %s",
                         bw_zsd_error_text(zd));
}
