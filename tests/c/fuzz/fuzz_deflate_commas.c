/* libFuzzer target: the comma coder. Any input coded as one comma block (and again cut in two
   blocks, the second after a zlib block) must inflate, by zlib as the reference, to exactly
   the input; the block must be exactly the size announced before writing.
   sources: deflate_commas.c out_buffer.c
   libs: -lz */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "deflate_commas.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

static void put_block(bw_buf *out, const uint8_t *data, size_t n) {
    bw_comma_code code = {0};
    REQUIRE(bw_comma_code_make(data, n, &code) == 0);
    size_t before = out->len;
    REQUIRE(bw_comma_block_write(&code, data, n, out) == 0);
    REQUIRE(out->len - before == bw_comma_block_size(&code));
    bw_comma_code_free(&code);
}

static void put_zlib_block(bw_buf *out, const uint8_t *data, size_t n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    REQUIRE(deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    REQUIRE(bw_buf_reserve(out, n + n / 100 + 64) == 0);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)bw_buf_tail(out);
    z.avail_out = (uInt)(out->cap - out->len);
    REQUIRE(deflate(&z, Z_SYNC_FLUSH) == Z_OK);
    out->len = out->cap - z.avail_out;
    deflateEnd(&z);
}

static void require_inflates_to(const bw_buf *deflated, const uint8_t *want, size_t n) {
    uint8_t *plain = malloc(n + 1);
    REQUIRE(plain != NULL);
    z_stream z;
    memset(&z, 0, sizeof z);
    REQUIRE(inflateInit2(&z, -15) == Z_OK);
    z.next_in = (Bytef *)deflated->data;
    z.avail_in = (uInt)deflated->len;
    z.next_out = plain;
    z.avail_out = (uInt)(n + 1);
    REQUIRE(inflate(&z, Z_FINISH) == Z_STREAM_END);
    REQUIRE(z.total_out == n && z.avail_in == 0);
    REQUIRE(n == 0 || memcmp(plain, want, n) == 0);
    inflateEnd(&z);
    free(plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const unsigned char final_block[2] = {0x03, 0x00};
    bw_buf out;
    REQUIRE(bw_buf_init(&out, 0) == 0);
    put_block(&out, data, size);
    REQUIRE(bw_buf_append(&out, final_block, sizeof final_block) == 0);
    require_inflates_to(&out, data, size);
    out.len = 0;
    size_t cut = size > 0 ? data[0] % (size + 1) : 0;
    put_zlib_block(&out, data, cut);
    put_block(&out, data + cut, size - cut);
    REQUIRE(bw_buf_append(&out, final_block, sizeof final_block) == 0);
    require_inflates_to(&out, data, size);
    bw_buf_free(&out);
    return 0;
}
