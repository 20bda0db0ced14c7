/* The codecs of Parquet pages: which this build reads (bw_parquet_codecs), the check that a
   page's uncompressed size is one its compressed bytes can hold, and decompression (zlib,
   bulkwire's own snappy decoder, libzstd when linked or the host's zstd decoder). See
   parquet_internal.h. */
#include <string.h>
#include <zlib.h>

#include "parquet_internal.h"
#include "snappy.h"

#ifdef BW_HAVE_ZSTD
#include <zstd.h>
#else
#include <stdatomic.h>
#endif

/* ---- zstd ------------------------------------------------------------------------------ */

#ifndef BW_HAVE_ZSTD
/* The host's zstd decoder where libzstd is not linked (NULL, as every static starts: none,
   zstd pages not covered; clang takes no NULL as the initializer of an _Atomic pointer). */
static _Atomic(bw_zstd_page_decoder) zstd_decoder;
#endif

void bw_parquet_set_zstd_decoder(bw_zstd_page_decoder decoder) {
#ifdef BW_HAVE_ZSTD
    (void)decoder; /* libzstd decodes them */
#else
    atomic_store(&zstd_decoder, decoder);
#endif
}

/* Whether zstd pages are read here: libzstd linked, or a decoder set. */
static int zstd_decodable(void) {
#ifdef BW_HAVE_ZSTD
    return 1;
#else
    return atomic_load(&zstd_decoder) != NULL;
#endif
}

#define ZSTD_MAGIC 0xFD2FB528u

/* Reads the zstd frame header at `in` (RFC 8878, 3.1.1): -1 when the bytes do not start
   with a frame; 1 with *said the content size it declares when it declares one and it is the
   only frame, ending exactly at in + in_size (its blocks walked by their headers); 0
   otherwise (no size declared, more frames, or a frame cut short: decompression judges). */
static int zstd_frame_size(const uint8_t *in, size_t in_size, uint64_t *said) {
    if (in_size < 5 || bw_pq_le32(in) != ZSTD_MAGIC)
        return -1;
    uint8_t descriptor = in[4];
    if (descriptor & 0x08) /* the reserved bit */
        return -1;
    int single_segment = (descriptor >> 5) & 1, checksum = (descriptor >> 2) & 1;
    static const size_t dictionary_id_bytes[4] = {0, 1, 2, 4};
    static const size_t size_bytes[4] = {0, 2, 4, 8};
    size_t fcs = size_bytes[descriptor >> 6];
    if (fcs == 0 && single_segment)
        fcs = 1;
    if (fcs == 0)
        return 0;
    size_t at = 5 + (size_t)!single_segment + dictionary_id_bytes[descriptor & 3];
    if (at + fcs > in_size)
        return 0;
    uint64_t size = 0;
    for (size_t i = 0; i < fcs; i++)
        size |= (uint64_t)in[at + i] << (8 * i);
    if (fcs == 2)
        size += 256;
    at += fcs;
    for (;;) { /* the blocks: a 3-byte header each, its last bit set on the last one */
        if (in_size - at < 3)
            return 0;
        uint32_t header = (uint32_t)in[at] | (uint32_t)in[at + 1] << 8 | (uint32_t)in[at + 2] << 16;
        uint32_t type = (header >> 1) & 3, block = header >> 3;
        at += 3;
        size_t body = type == 1 ? 1 : block; /* an RLE block holds one byte */
        if (type == 3 || in_size - at < body)
            return 0;
        at += body;
        if (header & 1)
            break;
    }
    if (checksum) {
        if (in_size - at < 4)
            return 0;
        at += 4;
    }
    if (at != in_size)
        return 0;
    *said = size;
    return 1;
}

/* ---- the uncompressed size, checked ---------------------------------------------------- */

/* The most bytes one compressed byte can become: deflate codes a match of 258 bytes in two
   bits at best; a zstd block of at most 128 KiB takes at least 4 bytes (an RLE block). */
#define DEFLATE_MAX_RATIO 1032
#define ZSTD_MAX_RATIO 32768

int bw_pq_check_plain_size(int codec, const uint8_t *in, size_t in_size, size_t plain_size,
                           char *error) {
    switch (codec) {
    case BW_PQ_UNCOMPRESSED:
        if (in_size != plain_size)
            return bw_pq_malformed(error, "uncompressed page of %zu bytes says %zu", in_size,
                                   plain_size);
        return BW_PAGES_OK;
    case BW_PQ_GZIP:
        if ((uint64_t)plain_size > (uint64_t)in_size * DEFLATE_MAX_RATIO)
            return bw_pq_malformed(error, "gzip page of %zu bytes cannot inflate to the %zu its "
                                   "header says", in_size, plain_size);
        return BW_PAGES_OK;
    case BW_PQ_ZSTD: {
        if (!zstd_decodable())
            return BW_PAGES_NOT_COVERED;
        /* a single frame that says its size must say the header's; otherwise the ratio */
        uint64_t said = 0;
        int frame = zstd_frame_size(in, in_size, &said);
        if (frame < 0)
            return bw_pq_malformed(error, "zstd page does not start with a zstd frame");
        if (frame > 0) {
            if (said != (uint64_t)plain_size)
                return bw_pq_malformed(error, "zstd page holds %llu bytes, its header says %zu",
                                       (unsigned long long)said, plain_size);
        } else if ((uint64_t)plain_size > (uint64_t)in_size * ZSTD_MAX_RATIO) {
            return bw_pq_malformed(error, "zstd page of %zu bytes cannot decompress to the %zu its "
                                   "header says", in_size, plain_size);
        }
        return BW_PAGES_OK;
    }
    case BW_PQ_SNAPPY: {
        size_t said = 0;
        if (bw_snappy_length(in, in_size, &said) != 0 || said != plain_size)
            return bw_pq_malformed(error, "snappy page does not decompress to the %zu bytes its "
                                   "header says", plain_size);
        return BW_PAGES_OK;
    }
    default:
        return BW_PAGES_NOT_COVERED;
    }
}

/* ---- decompression --------------------------------------------------------------------- */

int bw_pq_decompress(int codec, const uint8_t *in, size_t in_size, uint8_t *out,
                     size_t out_size, char *error) {
    switch (codec) {
    case BW_PQ_GZIP: {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 32) != Z_OK)
            return BW_PAGES_NO_MEMORY;
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)in_size;
        z.next_out = out;
        z.avail_out = (uInt)out_size;
        int zrc = inflate(&z, Z_FINISH);
        size_t produced = (size_t)z.total_out;
        inflateEnd(&z);
        if (zrc != Z_STREAM_END || produced != out_size)
            return bw_pq_malformed(error, "gzip page does not inflate to its %zu bytes",
                                   out_size);
        return BW_PAGES_OK;
    }
    case BW_PQ_ZSTD: {
        int rc;
#ifdef BW_HAVE_ZSTD
        size_t produced = ZSTD_decompress(out, out_size, in, in_size);
        rc = ZSTD_isError(produced) || produced != out_size ? BW_PAGES_MALFORMED : BW_PAGES_OK;
#else
        bw_zstd_page_decoder decoder = atomic_load(&zstd_decoder);
        if (decoder == NULL)
            return BW_PAGES_NOT_COVERED;
        rc = decoder(in, in_size, out, out_size);
#endif
        if (rc == BW_PAGES_NO_MEMORY)
            return rc;
        if (rc != BW_PAGES_OK)
            return bw_pq_malformed(error, "zstd page does not decompress to its %zu bytes",
                                   out_size);
        return BW_PAGES_OK;
    }
    case BW_PQ_SNAPPY: {
        const char *why = NULL;
        if (bw_snappy_decompress(in, in_size, out, out_size, &why) != 0)
            return bw_pq_malformed(error, "snappy page does not decompress to its %zu bytes: %s",
                                   out_size, why);
        return BW_PAGES_OK;
    }
    default:
        return BW_PAGES_NOT_COVERED;
    }
}
/* ---- the codec table ------------------------------------------------------------------- */

#ifdef BW_HAVE_ZSTD
#define ZSTD_COVERED 1
#else
#define ZSTD_COVERED 0 /* unless a decoder is set: bw_parquet_set_zstd_decoder */
#endif

static const bw_parquet_codec codecs[] = {
    {BW_PQ_UNCOMPRESSED, "UNCOMPRESSED", 1, NULL},
    {BW_PQ_SNAPPY, "SNAPPY", 1, NULL}, /* bulkwire's own decompressor (snappy.c) */
    {BW_PQ_GZIP, "GZIP", 1, NULL},
    {3, "LZO", 0, NULL},
    {4, "BROTLI", 0, NULL},
    {5, "LZ4", 0, NULL},
    {BW_PQ_ZSTD, "ZSTD", ZSTD_COVERED, "libzstd"},
    {7, "LZ4_RAW", 0, NULL},
};

const bw_parquet_codec *bw_parquet_codecs(size_t *count) {
    *count = sizeof codecs / sizeof codecs[0];
    return codecs;
}
