/* Numbers in memory -> JSON arrays: every element type, strides, the other byte order, the
   float32 choice, and the room it reserves.
   sources: json_array.c float_text.c int_text.c out_buffer.c */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "json_array.h"

TEST(every_element_type) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    const int8_t i8[] = {-128, 0, 127};
    const uint64_t u64[] = {0, UINT64_MAX};
    const int64_t i64[] = {INT64_MIN, -1};
    const uint8_t flags[] = {0, 1, 7};
    const uint16_t halves[] = {0x3c00, 0xc000, 0x7c00, 0x0001}; /* 1, -2, inf, smallest */
    const double doubles[] = {0.1, -0.0, 1e300};
    CHECK_EQ(bw_json_array(&b, BW_NUM_I8, (const char *)i8, 3, 1, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_U64, (const char *)u64, 2, 8, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_I64, (const char *)i64, 2, 8, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_BOOL, (const char *)flags, 3, 1, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_F16, (const char *)halves, 4, 2, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_F64, (const char *)doubles, 3, 8, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_F64, (const char *)doubles, 0, 8, 0, 0), 0);
    CHECK_BYTES(b.data, b.len,
                "[-128, 0, 127][0, 18446744073709551615][-9223372036854775808, -1]"
                "[false, true, true][1.0, -2.0, Infinity, 5.960464477539063e-08]"
                "[0.1, -0.0, 1e+300][]");
    bw_buf_free(&b);
}

TEST(float32_widen_or_shortest) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    const float v[] = {0.1f, 1.0f};
    CHECK_EQ(bw_json_array(&b, BW_NUM_F32, (const char *)v, 2, 4, 0, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_F32, (const char *)v, 2, 4, 0, 1), 0);
    CHECK_EQ(bw_json_number(&b, BW_NUM_F32, (const char *)v, 1), 0);
    CHECK_BYTES(b.data, b.len, "[0.10000000149011612, 1.0][0.1, 1.0]0.1");
    bw_buf_free(&b);
}

TEST(strides_and_the_other_byte_order) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    const int32_t grid[2][2] = {{1, 2}, {3, 4}};
    CHECK_EQ(bw_json_array(&b, BW_NUM_I32, (const char *)&grid[0][0], 2, 8, 0, 0), 0); /* column */
    CHECK_EQ(bw_json_array(&b, BW_NUM_I32, (const char *)&grid[1][1], 2, -4, 0, 0), 0); /* reversed */
    const unsigned char swapped_one[] = {0x3f, 0x80, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00};
    const unsigned char big_16[] = {0x01, 0x02};
    int little = 1;
    int other = *(const char *)&little == 1; /* big-endian bytes are the other order here */
    CHECK_EQ(bw_json_array(&b, BW_NUM_F32, (const char *)swapped_one, 2, 4, other, 1), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_U16, (const char *)big_16, 1, 2, other, 0), 0);
    CHECK_BYTES(b.data, b.len, "[1, 3][4, 3][1.0, 2.0][258]");
    bw_buf_free(&b);
}

TEST(room_is_refused_before_overflow) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    CHECK_EQ(bw_json_array(&b, BW_NUM_F64, NULL, SIZE_MAX / 8, 8, 0, 0), -1);
    CHECK_EQ(b.len, 0);
    bw_buf_free(&b);
}

RUN_TESTS(every_element_type, float32_widen_or_shortest, strides_and_the_other_byte_order,
          room_is_refused_before_overflow)
