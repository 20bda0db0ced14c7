/* The CQL notation: each writer's bytes against the protocol's layout written out by hand,
   random round trips through the cursor, every cut of an item refused with the cursor
   unchanged (on heap copies of exactly the cut's length, so a read past it is a sanitizer
   report), negative lengths, the frame header and the response extras.
   sources: cql_wire.c out_buffer.c */
#include <stdint.h>
#include <stdlib.h>

#include "buffer_check.h"
#include "check.h"
#include "cql_wire.h"

TEST(writers_lay_out_big_endian) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    CHECK_EQ(bw_cql_put_byte(&b, 0xab), 0);
    CHECK_EQ(bw_cql_put_short(&b, 0x1234), 0);
    CHECK_EQ(bw_cql_put_int(&b, -2), 0);
    CHECK_EQ(bw_cql_put_long(&b, INT64_C(0x0102030405060708)), 0);
    const uint8_t want[] = {0xab, 0x12, 0x34, 0xff, 0xff, 0xff, 0xfe,
                            1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(buffer_is(&b, want, sizeof want));
    b.len = 0;
    CHECK_EQ(bw_cql_put_string(&b, "abc", 3), 0);
    CHECK_EQ(bw_cql_put_long_string(&b, "de", 2), 0);
    CHECK_EQ(bw_cql_put_bytes(&b, "\x00\x01", 2), 0);
    CHECK_EQ(bw_cql_put_bytes(&b, NULL, 99), 0);
    CHECK_EQ(bw_cql_put_bytes(&b, "", 0), 0);
    CHECK_EQ(bw_cql_put_short_bytes(&b, "z", 1), 0);
    const uint8_t want2[] = {0, 3, 'a', 'b', 'c', 0, 0, 0, 2, 'd', 'e', 0, 0, 0, 2, 0, 1,
                             0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 'z'};
    CHECK(buffer_is(&b, want2, sizeof want2));
    b.len = 0;
    const char *keys[] = {"CQL_VERSION", "X"};
    const char *values[] = {"3.0.0", ""};
    CHECK_EQ(bw_cql_put_string_map(&b, keys, values, 2), 0);
    const uint8_t want3[] = {0, 2, 0, 11, 'C', 'Q', 'L', '_', 'V', 'E', 'R', 'S', 'I', 'O', 'N',
                             0, 5, '3', '.', '0', '.', '0', 0, 1, 'X', 0, 0};
    CHECK(buffer_is(&b, want3, sizeof want3));
    b.len = 0;
    CHECK_EQ(bw_cql_put_string_list(&b, keys, 2), 0);
    const uint8_t want4[] = {0, 2, 0, 11, 'C', 'Q', 'L', '_', 'V', 'E', 'R', 'S', 'I', 'O', 'N',
                             0, 1, 'X'};
    CHECK(buffer_is(&b, want4, sizeof want4));
    bw_buf_free(&b);
}

TEST(lengths_beyond_the_notation_are_refused_and_leave_the_buffer) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    CHECK_EQ(bw_cql_put_byte(&b, 7), 0);
    static char big[65536];
    memset(big, 'a', sizeof big);
    CHECK_EQ(bw_cql_put_string(&b, big, 65536), -1);
    CHECK_EQ(bw_cql_put_short_bytes(&b, big, 65536), -1);
    CHECK_EQ(bw_cql_put_bytes(&b, big, (size_t)INT32_MAX + 1), -1);
    CHECK_EQ(bw_cql_put_long_string(&b, big, (size_t)INT32_MAX + 1), -1);
    CHECK_EQ(b.len, 1);
    CHECK_EQ(bw_cql_put_string(&b, big, 65535), 0);
    CHECK_EQ(b.len, 1 + 2 + 65535);
    /* a list whose second item is too long: nothing of the list stays */
    big[65535] = '\0';
    char *longest = malloc(65537);
    memset(longest, 'b', 65536);
    longest[65536] = '\0';
    const char *items[] = {"ok", longest};
    size_t before = b.len;
    CHECK_EQ(bw_cql_put_string_list(&b, items, 2), -1);
    CHECK_EQ(b.len, before);
    const char *values[] = {"v", "w"};
    CHECK_EQ(bw_cql_put_string_map(&b, items, values, 2), -1);
    CHECK_EQ(b.len, before);
    free(longest);
    bw_buf_free(&b);
}

TEST(patch_int_overwrites_in_place) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    CHECK_EQ(bw_cql_put_int(&b, 0), 0);
    CHECK_EQ(bw_cql_put_byte(&b, 9), 0);
    bw_cql_patch_int(&b, 0, 0x01020304);
    const uint8_t want[] = {1, 2, 3, 4, 9};
    CHECK(buffer_is(&b, want, sizeof want));
    bw_buf_free(&b);
}

TEST(random_items_round_trip) {
    unsigned long long state = 99;
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    for (int round = 0; round < 2000; round++) {
        b.len = 0;
        uint8_t v8 = (uint8_t)check_rand(&state);
        uint16_t v16 = (uint16_t)check_rand(&state);
        int32_t v32 = (int32_t)(uint32_t)check_rand(&state);
        int64_t v64 = (int64_t)check_rand(&state);
        char text[300];
        size_t tn = check_rand(&state) % sizeof text;
        for (size_t i = 0; i < tn; i++)
            text[i] = (char)check_rand(&state);
        int null_bytes = (int)(check_rand(&state) % 4 == 0);
        CHECK_EQ(bw_cql_put_byte(&b, v8), 0);
        CHECK_EQ(bw_cql_put_short(&b, v16), 0);
        CHECK_EQ(bw_cql_put_int(&b, v32), 0);
        CHECK_EQ(bw_cql_put_long(&b, v64), 0);
        CHECK_EQ(bw_cql_put_string(&b, text, tn), 0);
        CHECK_EQ(bw_cql_put_long_string(&b, text, tn), 0);
        CHECK_EQ(bw_cql_put_bytes(&b, null_bytes ? NULL : text, tn), 0);
        CHECK_EQ(bw_cql_put_short_bytes(&b, text, tn), 0);
        bw_cql_cursor c = bw_cql_cursor_make(b.data, b.len);
        uint8_t r8;
        uint16_t r16;
        int32_t r32, rn;
        int64_t r64;
        const char *s;
        const uint8_t *p;
        size_t n;
        CHECK(bw_cql_get_byte(&c, &r8) == 0 && r8 == v8);
        CHECK(bw_cql_get_short(&c, &r16) == 0 && r16 == v16);
        CHECK(bw_cql_get_int(&c, &r32) == 0 && r32 == v32);
        CHECK(bw_cql_get_long(&c, &r64) == 0 && r64 == v64);
        CHECK(bw_cql_get_string(&c, &s, &n) == 0 && n == tn && memcmp(s, text, n) == 0);
        CHECK(bw_cql_get_long_string(&c, &s, &n) == 0 && n == tn && memcmp(s, text, n) == 0);
        CHECK_EQ(bw_cql_get_bytes(&c, &p, &rn), 0);
        if (null_bytes)
            CHECK(rn == -1 && p == NULL);
        else
            CHECK(rn == (int32_t)tn && memcmp(p, text, tn) == 0);
        CHECK(bw_cql_get_short_bytes(&c, &p, &n) == 0 && n == tn && memcmp(p, text, n) == 0);
        CHECK_EQ(c.left, 0);
        CHECK_EQ(bw_cql_get_byte(&c, &r8), -1);
        if (check_failures)
            break;
    }
    bw_buf_free(&b);
}

/* One item kind read from a cursor; 0 or -1. */
typedef int (*getter)(bw_cql_cursor *c);

static int get_byte_(bw_cql_cursor *c) { uint8_t v; return bw_cql_get_byte(c, &v); }
static int get_short_(bw_cql_cursor *c) { uint16_t v; return bw_cql_get_short(c, &v); }
static int get_int_(bw_cql_cursor *c) { int32_t v; return bw_cql_get_int(c, &v); }
static int get_long_(bw_cql_cursor *c) { int64_t v; return bw_cql_get_long(c, &v); }
static int get_string_(bw_cql_cursor *c) { const char *s; size_t n; return bw_cql_get_string(c, &s, &n); }
static int get_long_string_(bw_cql_cursor *c) { const char *s; size_t n; return bw_cql_get_long_string(c, &s, &n); }
static int get_bytes_(bw_cql_cursor *c) { const uint8_t *p; int32_t n; return bw_cql_get_bytes(c, &p, &n); }
static int get_value_(bw_cql_cursor *c) { const uint8_t *p; int32_t n; return bw_cql_get_value(c, &p, &n); }
static int get_short_bytes_(bw_cql_cursor *c) { const uint8_t *p; size_t n; return bw_cql_get_short_bytes(c, &p, &n); }
static int get_list_(bw_cql_cursor *c) { uint16_t k; bw_cql_cursor i; return bw_cql_get_string_list(c, &k, &i); }
static int get_map_(bw_cql_cursor *c) { uint16_t k; bw_cql_cursor i; return bw_cql_get_string_map(c, &k, &i); }
static int get_multimap_(bw_cql_cursor *c) { uint16_t k; bw_cql_cursor i; return bw_cql_get_string_multimap(c, &k, &i); }
static int get_bytes_map_(bw_cql_cursor *c) { uint16_t k; bw_cql_cursor i; return bw_cql_get_bytes_map(c, &k, &i); }

/* Every proper prefix of a whole item fails without moving the cursor; the whole item
   succeeds and consumes exactly itself. */
static void check_every_cut(getter get, const uint8_t *item, size_t n) {
    for (size_t cut = 0; cut <= n; cut++) {
        uint8_t *exact = malloc(cut ? cut : 1);
        memcpy(exact, item, cut);
        bw_cql_cursor c = bw_cql_cursor_make(exact, cut);
        int rc = get(&c);
        if (cut < n) {
            CHECK_EQ(rc, -1);
            CHECK(c.p == exact && c.left == cut);
        } else {
            CHECK_EQ(rc, 0);
            CHECK_EQ(c.left, 0);
        }
        free(exact);
    }
}

TEST(every_cut_of_every_item_is_refused_in_bounds) {
    const uint8_t one[] = {1};
    const uint8_t two[] = {1, 2};
    const uint8_t four[] = {1, 2, 3, 4};
    const uint8_t eight[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uint8_t string[] = {0, 3, 'a', 'b', 'c'};
    const uint8_t long_string[] = {0, 0, 0, 2, 'x', 'y'};
    const uint8_t bytes[] = {0, 0, 0, 1, 0xee};
    const uint8_t null_bytes[] = {0xff, 0xff, 0xff, 0xff};
    const uint8_t unset_value[] = {0xff, 0xff, 0xff, 0xfe};
    const uint8_t list[] = {0, 2, 0, 1, 'a', 0, 2, 'b', 'c'};
    const uint8_t map[] = {0, 1, 0, 1, 'k', 0, 2, 'v', 'w'};
    const uint8_t multimap[] = {0, 1, 0, 1, 'k', 0, 2, 0, 1, 'a', 0, 0};
    const uint8_t bytes_map[] = {0, 2, 0, 1, 'k', 0, 0, 0, 1, 9, 0, 1, 'n', 0xff, 0xff, 0xff, 0xff};
    check_every_cut(get_byte_, one, sizeof one);
    check_every_cut(get_short_, two, sizeof two);
    check_every_cut(get_int_, four, sizeof four);
    check_every_cut(get_long_, eight, sizeof eight);
    check_every_cut(get_string_, string, sizeof string);
    check_every_cut(get_short_bytes_, string, sizeof string);
    check_every_cut(get_long_string_, long_string, sizeof long_string);
    check_every_cut(get_bytes_, bytes, sizeof bytes);
    check_every_cut(get_bytes_, null_bytes, sizeof null_bytes);
    check_every_cut(get_value_, unset_value, sizeof unset_value);
    check_every_cut(get_list_, list, sizeof list);
    check_every_cut(get_map_, map, sizeof map);
    check_every_cut(get_multimap_, multimap, sizeof multimap);
    check_every_cut(get_bytes_map_, bytes_map, sizeof bytes_map);
}

TEST(negative_lengths_are_refused_where_the_notation_forbids_them) {
    const uint8_t minus_two[] = {0xff, 0xff, 0xff, 0xfe};
    const uint8_t minus_one[] = {0xff, 0xff, 0xff, 0xff};
    const uint8_t most_negative[] = {0x80, 0, 0, 0};
    bw_cql_cursor c = bw_cql_cursor_make(minus_two, 4);
    CHECK_EQ(get_bytes_(&c), -1); /* [bytes]: only -1 is null */
    CHECK_EQ(c.left, 4);
    CHECK_EQ(get_value_(&c), 0);  /* [value]: -2 is "not set" */
    c = bw_cql_cursor_make(minus_one, 4);
    CHECK_EQ(get_long_string_(&c), -1); /* no null [long string] */
    c = bw_cql_cursor_make(most_negative, 4);
    CHECK_EQ(get_bytes_(&c), -1);
    CHECK_EQ(get_value_(&c), -1);
    CHECK_EQ(c.left, 4);
}

TEST(compound_items_give_a_cursor_over_their_entries) {
    const uint8_t multimap[] = {0, 2, 0, 1, 'k', 0, 2, 0, 1, 'a', 0, 0,
                                0, 1, 'j', 0, 0, 0xaa};
    bw_cql_cursor c = bw_cql_cursor_make(multimap, sizeof multimap);
    uint16_t count = 0;
    bw_cql_cursor items;
    CHECK_EQ(bw_cql_get_string_multimap(&c, &count, &items), 0);
    CHECK_EQ(count, 2);
    CHECK_EQ(c.left, 1); /* the 0xaa after it */
    CHECK_EQ(items.left, sizeof multimap - 3);
    const char *s;
    size_t n;
    uint16_t inner;
    bw_cql_cursor values;
    CHECK(bw_cql_get_string(&items, &s, &n) == 0 && n == 1 && s[0] == 'k');
    CHECK(bw_cql_get_string_list(&items, &inner, &values) == 0 && inner == 2);
    CHECK(bw_cql_get_string(&values, &s, &n) == 0 && n == 1 && s[0] == 'a');
    CHECK(bw_cql_get_string(&values, &s, &n) == 0 && n == 0);
    CHECK_EQ(values.left, 0);
    CHECK(bw_cql_get_string(&items, &s, &n) == 0 && n == 1 && s[0] == 'j');
    CHECK(bw_cql_get_string_list(&items, &inner, &values) == 0 && inner == 0);
    CHECK_EQ(items.left, 0);
    /* a count larger than the entries present */
    const uint8_t short_list[] = {0xff, 0xff, 0, 0};
    c = bw_cql_cursor_make(short_list, sizeof short_list);
    CHECK_EQ(bw_cql_get_string_list(&c, &count, &items), -1);
    CHECK_EQ(c.left, sizeof short_list);
}

TEST(frame_header_round_trip) {
    unsigned long long state = 5;
    for (int i = 0; i < 1000; i++) {
        bw_cql_header h = {(uint8_t)check_rand(&state), (uint8_t)check_rand(&state),
                           (int16_t)(uint16_t)check_rand(&state), (uint8_t)check_rand(&state),
                           (uint32_t)(check_rand(&state) & 0x7fffffff)};
        uint8_t b[BW_CQL_HEADER_SIZE];
        bw_cql_header_write(b, &h);
        bw_cql_header back;
        CHECK_EQ(bw_cql_header_read(b, &back), 0);
        CHECK(back.version == h.version && back.flags == h.flags && back.stream == h.stream &&
              back.opcode == h.opcode && back.length == h.length);
    }
    bw_buf buf;
    CHECK_EQ(bw_buf_init(&buf, 0), 0);
    bw_cql_header h = {BW_CQL_VERSION_4, 0, -1, BW_CQL_OP_OPTIONS, 0x0102};
    CHECK_EQ(bw_cql_put_header(&buf, &h), 0);
    const uint8_t want[] = {0x04, 0x00, 0xff, 0xff, 0x05, 0, 0, 1, 2};
    CHECK(buffer_is(&buf, want, sizeof want));
    bw_buf_free(&buf);
    const uint8_t negative[] = {0x84, 0, 0, 1, 8, 0x80, 0, 0, 0};
    bw_cql_header back = {0, 0, 0, 0, 77};
    CHECK_EQ(bw_cql_header_read(negative, &back), -1);
    CHECK_EQ(back.length, 77);
}

TEST(response_extras_are_skipped_in_order) {
    /* tracing id, one warning, a payload of one entry, then the message */
    uint8_t body[16 + 2 + 2 + 1 + 2 + 2 + 1 + 4 + 1 + 1];
    size_t at = 0;
    for (int i = 0; i < 16; i++)
        body[at++] = (uint8_t)i;
    const uint8_t warning[] = {0, 1, 0, 1, 'w'};
    memcpy(body + at, warning, sizeof warning);
    at += sizeof warning;
    const uint8_t payload[] = {0, 1, 0, 1, 'k', 0, 0, 0, 1, 'v'};
    memcpy(body + at, payload, sizeof payload);
    at += sizeof payload;
    body[at++] = 0x42;
    bw_cql_cursor c = bw_cql_cursor_make(body, at);
    CHECK_EQ(bw_cql_skip_response_extras(&c, BW_CQL_FLAG_TRACING | BW_CQL_FLAG_WARNING |
                                                 BW_CQL_FLAG_CUSTOM_PAYLOAD), 0);
    CHECK(c.left == 1 && c.p[0] == 0x42);
    /* only a warning */
    c = bw_cql_cursor_make(body + 16, at - 16);
    CHECK_EQ(bw_cql_skip_response_extras(&c, BW_CQL_FLAG_WARNING), 0);
    CHECK_EQ(c.left, sizeof payload + 1);
    /* no flags: nothing moves */
    c = bw_cql_cursor_make(body, at);
    CHECK_EQ(bw_cql_skip_response_extras(&c, 0), 0);
    CHECK_EQ(c.left, at);
    /* a body too short for its flags */
    for (size_t cut = 0; cut < 16 + sizeof warning; cut++) {
        c = bw_cql_cursor_make(body, cut);
        CHECK_EQ(bw_cql_skip_response_extras(&c, BW_CQL_FLAG_TRACING | BW_CQL_FLAG_WARNING), -1);
        CHECK_EQ(c.left, cut);
    }
}

RUN_TESTS(writers_lay_out_big_endian, lengths_beyond_the_notation_are_refused_and_leave_the_buffer,
          patch_int_overwrites_in_place, random_items_round_trip,
          every_cut_of_every_item_is_refused_in_bounds,
          negative_lengths_are_refused_where_the_notation_forbids_them,
          compound_items_give_a_cursor_over_their_entries, frame_header_round_trip,
          response_extras_are_skipped_in_order)
