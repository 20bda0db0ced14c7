/* libFuzzer target: the CQL notation's read cursor and the ERROR body. The input is a
   script: each step's first byte picks an item kind, which is read from the rest. A read
   that succeeds must have consumed exactly what the writer of that kind writes for the value
   read (written again, the bytes are the same); a read that fails must leave the cursor
   where it was. The ERROR parser, the response extras' skip and the keeping of their tablet
   entries must stay inside the input (a heap block of exactly its size) whatever it holds.
   sources: cql_wire.c cql_conn.c cql_shard.c out_buffer.c socket_send.c fork_origin.c status.c
   libs: -lpthread */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cql_conn.h"
#include "cql_shard.h"
#include "cql_wire.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

/* Reads one item of `kind` and checks it against the writer; 0 or -1 as the get. */
static int step(bw_cql_cursor *c, uint8_t kind, bw_buf *again) {
    bw_cql_cursor before = *c;
    const uint8_t *p;
    const char *s;
    size_t n;
    int32_t len;
    uint16_t count, v16;
    int32_t v32;
    int64_t v64;
    bw_cql_cursor items;
    int rc;
    again->len = 0;
    switch (kind % 10) {
    case 0: rc = bw_cql_get_short(c, &v16); if (!rc) bw_cql_put_short(again, v16); break;
    case 1: rc = bw_cql_get_int(c, &v32); if (!rc) bw_cql_put_int(again, v32); break;
    case 2: rc = bw_cql_get_long(c, &v64); if (!rc) bw_cql_put_long(again, v64); break;
    case 3: rc = bw_cql_get_string(c, &s, &n); if (!rc) bw_cql_put_string(again, s, n); break;
    case 4: rc = bw_cql_get_long_string(c, &s, &n); if (!rc) bw_cql_put_long_string(again, s, n); break;
    case 5:
        rc = bw_cql_get_bytes(c, &p, &len);
        if (!rc) {
            REQUIRE(len >= -1 && (len < 0) == (p == NULL));
            bw_cql_put_bytes(again, p, len < 0 ? 0 : (size_t)len);
        }
        break;
    case 6: rc = bw_cql_get_short_bytes(c, &p, &n); if (!rc) bw_cql_put_short_bytes(again, p, n); break;
    case 7:
        rc = bw_cql_get_string_list(c, &count, &items);
        if (!rc) {
            bw_cql_put_short(again, count);
            for (uint16_t i = 0; i < count; i++) {
                REQUIRE(bw_cql_get_string(&items, &s, &n) == 0);
                bw_cql_put_string(again, s, n);
            }
            REQUIRE(items.left == 0);
        }
        break;
    case 8:
        rc = bw_cql_get_string_multimap(c, &count, &items);
        if (!rc) {
            bw_cql_put_short(again, count);
            for (uint16_t i = 0; i < count; i++) {
                uint16_t inner;
                bw_cql_cursor values;
                REQUIRE(bw_cql_get_string(&items, &s, &n) == 0);
                bw_cql_put_string(again, s, n);
                REQUIRE(bw_cql_get_string_list(&items, &inner, &values) == 0);
                bw_cql_put_short(again, inner);
                for (uint16_t j = 0; j < inner; j++) {
                    REQUIRE(bw_cql_get_string(&values, &s, &n) == 0);
                    bw_cql_put_string(again, s, n);
                }
            }
            REQUIRE(items.left == 0);
        }
        break;
    default:
        rc = bw_cql_get_bytes_map(c, &count, &items);
        if (!rc) {
            bw_cql_put_short(again, count);
            for (uint16_t i = 0; i < count; i++) {
                REQUIRE(bw_cql_get_string(&items, &s, &n) == 0);
                bw_cql_put_string(again, s, n);
                REQUIRE(bw_cql_get_bytes(&items, &p, &len) == 0);
                bw_cql_put_bytes(again, p, len < 0 ? 0 : (size_t)len);
            }
            REQUIRE(items.left == 0);
        }
        break;
    }
    if (rc < 0) {
        REQUIRE(c->p == before.p && c->left == before.left);
    } else {
        size_t used = before.left - c->left;
        REQUIRE(c->p == before.p + used);
        REQUIRE(again->len == used && memcmp(again->data, before.p, used) == 0);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bw_buf again;
    if (bw_buf_init(&again, 256) < 0)
        return 0;
    bw_cql_cursor c = bw_cql_cursor_make(data, size);
    uint8_t kind;
    while (bw_cql_get_byte(&c, &kind) == 0)
        if (step(&c, kind, &again) < 0)
            break;
    bw_buf_free(&again);
    bw_cql_error e;
    if (bw_cql_error_parse(data, size, &e) == 0)
        REQUIRE(strlen(e.message) < sizeof e.message && strlen(e.write_type) < sizeof e.write_type);
    if (size > 0) {
        bw_cql_cursor body = bw_cql_cursor_make(data + 1, size - 1);
        if (bw_cql_skip_response_extras(&body, data[0]) == 0)
            REQUIRE(body.p + body.left == data + size);
        else
            REQUIRE(body.p == data + 1 && body.left == size - 1);
        /* the tablet entries of the same extras: kept within their bounds, or refused */
        bw_cql_kept kept;
        memset(&kept, 0, sizeof kept);
        if (bw_cql_kept_take_payload(&kept, data[0], data + 1, size - 1) == 0)
            REQUIRE(kept.count <= BW_CQL_KEPT_MAX && kept.len <= BW_CQL_KEPT_BYTES);
        else
            REQUIRE(kept.count == 0);
        bw_cql_kept_free(&kept);
    }
    if (size >= BW_CQL_HEADER_SIZE) {
        bw_cql_header h;
        if (bw_cql_header_read(data, &h) == 0) {
            uint8_t out[BW_CQL_HEADER_SIZE];
            bw_cql_header_write(out, &h);
            REQUIRE(memcmp(out, data, BW_CQL_HEADER_SIZE) == 0);
        }
    }
    return 0;
}
