/* murmur3.c: tokens of keys of every tail length against the values the scylla-driver's
   murmur3 computes (tests/test_cql_values.py compares them over random keys).
   sources: murmur3.c */
#include "check.h"

#include <stdint.h>

#include "murmur3.h"

TEST(hash_of_known_keys) {
    uint8_t seq[17], high[17], ff[31];
    for (int i = 0; i < 17; i++) {
        seq[i] = (uint8_t)i;
        high[i] = (uint8_t)(128 + i);
    }
    for (int i = 0; i < 31; i++)
        ff[i] = 0xff;
    CHECK(bw_murmur3_hash((const uint8_t *)"", 0) == 0);
    CHECK(bw_murmur3_hash((const uint8_t *)"a", 1) == -8839064797231613815LL);
    CHECK(bw_murmur3_hash((const uint8_t *)"hello", 5) == -3758069500696749310LL);
    CHECK(bw_murmur3_hash(seq, 15) == 5125964547706398185LL);
    CHECK(bw_murmur3_hash(seq, 16) == 4920504430128807728LL);
    /* tail bytes of 0x80 and more: the partitioner reads them as signed */
    CHECK(bw_murmur3_hash(high, 17) == -3616694464407856223LL);
    CHECK(bw_murmur3_hash(ff, 31) == -3550403632215323560LL);
}

TEST(token_is_the_hash_except_the_minimum) {
    CHECK(bw_murmur3_token((const uint8_t *)"hello", 5) == -3758069500696749310LL);
    CHECK(bw_murmur3_token((const uint8_t *)"", 0) == 0);
}

RUN_TESTS(hash_of_known_keys, token_is_the_hash_except_the_minimum)
