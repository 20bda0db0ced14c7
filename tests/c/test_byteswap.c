/* Every copy loop of byteswap.c against a byte-by-byte reference: the dispatched ones
   (AVX2 where the CPU has it) and the baseline loops the dispatcher may never pick here,
   over lengths, misalignments, strides and both directions. The file is included, not
   linked, so that its static loops can be called directly.
   sources: */
#include "byteswap.c"

#include "check.h"

enum { MAXN = 70, PAD = 16, ROOM = (MAXN + 2) * 16 * 3 + PAD };
static char src[ROOM], dst[ROOM], ref[ROOM];

static void fill_source(void) {
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof src; i++) {
        seed = seed * 1103515245u + 12345u;
        src[i] = (char)(seed >> 16);
    }
}

static const size_t widths[] = {1, 2, 3, 4, 8, 16};

TEST(strided_copies_match_the_reference) {
    fill_source();
    int bad = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t width = widths[w];
        for (size_t n = 0; n <= MAXN; n++)
            for (size_t off = 0; off < 4; off++)
                for (int stride_mul = 1; stride_mul <= 3; stride_mul++)
                    for (int swap = 0; swap <= 1; swap++) {
                        ptrdiff_t ss = (ptrdiff_t)(width * (size_t)stride_mul);
                        ptrdiff_t ds = (ptrdiff_t)(width * (size_t)(stride_mul == 2 ? 1 : stride_mul));
                        memset(dst, 0, sizeof dst);
                        memset(ref, 0, sizeof ref);
                        bw_copy_elements(dst + off, ds, src + off, ss, n, width, swap);
                        for (size_t i = 0; i < n; i++)
                            for (size_t b = 0; b < width; b++)
                                ref[off + i * (size_t)ds + b] =
                                    src[off + i * (size_t)ss + (swap ? width - 1 - b : b)];
                        bad += memcmp(dst, ref, sizeof dst) != 0;
                    }
    }
    CHECK_EQ(bad, 0);
}

TEST(baseline_loops_match_the_reference) {
    fill_source();
    int bad = 0;
    for (size_t width = 2; width <= 8; width *= 2)
        for (size_t n = 0; n <= MAXN; n++)
            for (size_t off = 0; off < 4; off++) {
                memset(dst, 0, sizeof dst);
                memset(ref, 0, sizeof ref);
                if (width == 2) swap2_contig_base(dst + off, src + off, n);
                if (width == 4) swap4_contig_base(dst + off, src + off, n);
                if (width == 8) swap8_contig_base(dst + off, src + off, n);
                for (size_t i = 0; i < n; i++)
                    for (size_t b = 0; b < width; b++)
                        ref[off + i * width + b] = src[off + i * width + width - 1 - b];
                bad += memcmp(dst, ref, sizeof dst) != 0;
            }
    CHECK_EQ(bad, 0);
}

TEST(negative_and_zero_strides) {
    fill_source();
    /* read backwards: the last element first */
    memset(dst, 0, sizeof dst);
    bw_copy_elements(dst, 4, src + 4 * 9, -4, 10, 4, 1);
    for (size_t i = 0; i < 10; i++)
        for (size_t b = 0; b < 4; b++)
            CHECK(dst[i * 4 + b] == src[(9 - i) * 4 + 3 - b]);
    /* a zero source stride repeats one element */
    memset(dst, 0, sizeof dst);
    bw_copy_elements(dst, 8, src, 0, 5, 8, 0);
    for (size_t i = 0; i < 5; i++)
        CHECK(memcmp(dst + i * 8, src, 8) == 0);
}

TEST(fill_strided_writes_only_its_bytes) {
    memset(dst, 'x', 40);
    bw_fill_strided(dst + 1, 5, 7, 0x04);
    for (size_t i = 0; i < 40; i++)
        CHECK(dst[i] == ((i % 5 == 1 && i < 36) ? 0x04 : 'x'));
}

RUN_TESTS(strided_copies_match_the_reference, baseline_loops_match_the_reference,
          negative_and_zero_strides, fill_strided_writes_only_its_bytes)
