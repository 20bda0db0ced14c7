#include "deflate_commas.h"

#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* RFC 1951 limits: literal/length and distance codes of at most 15 bits, code-length codes of
   at most 7. */
#define LITERAL_BITS_MAX 15
#define LENGTH_CODE_BITS_MAX 7
/* The alphabet that codes the code lengths: 0-15, then 16 (repeat the previous length 3-6
   times), 17 (3-10 zeros), 18 (11-138 zeros). */
#define LENGTH_SYMBOLS 19
/* The largest alphabet code_lengths is asked for. */
#define SYMBOLS_MAX BW_COMMA_LENGTH_SYMBOLS
#define END_OF_BLOCK 256
/* The order in which a dynamic block's header lists the code-length code's lengths. */
static const unsigned char length_order[LENGTH_SYMBOLS] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                           11, 4,  12, 3, 13, 2, 14, 1, 15};
/* Back-references: deflate's window, its shortest match, and the longest length code 284
   covers (258 has a code of its own, which this coder does not use). */
#define WINDOW ((size_t)32 << 10)
#define MATCH_MIN 3
#define MATCH_MAX 257

/* counts[b] += how many times byte b occurs in data[0..n). */
static void add_byte_counts(const unsigned char *data, size_t n, uint64_t *counts) {
    /* four tables, so that runs of one byte value do not wait on the same counter */
    uint32_t part[4][256];
    memset(part, 0, sizeof part);
    size_t i = 0;
    while (i < n) {
        /* flush before a 32-bit counter could wrap */
        size_t stop = n - i > ((size_t)1 << 30) ? i + ((size_t)1 << 30) : n;
        for (; i + 4 <= stop; i += 4) {
            part[0][data[i]]++;
            part[1][data[i + 1]]++;
            part[2][data[i + 2]]++;
            part[3][data[i + 3]]++;
        }
        for (; i < stop; i++)
            part[0][data[i]]++;
        for (int b = 0; b < 256; b++) {
            counts[b] += (uint64_t)part[0][b] + part[1][b] + part[2][b] + part[3][b];
            part[0][b] = part[1][b] = part[2][b] = part[3][b] = 0;
        }
    }
}

/* Eight bytes as a number, the first byte lowest. */
static inline uint64_t load_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#ifndef __SSE2__
/* 0x80 in each byte of word that is a comma, 0 in the others (exact: no borrow crosses
   bytes, since the high bits are kept out of the addition). */
static inline uint64_t comma_bytes(uint64_t word) {
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
    uint64_t t = word ^ 0x2C2C2C2C2C2C2C2CULL; /* a comma becomes 0 */
    return ~(((t & low7) + low7) | t | low7);
}
#endif

/* Bit k set where p[k] is a comma, for the 64 bytes at p. */
static inline uint64_t comma_mask64(const unsigned char *p) {
#ifdef __SSE2__
    const __m128i comma = _mm_set1_epi8(',');
    uint64_t mask = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        mask |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma)) << (16 * k);
    }
    return mask;
#else
    uint64_t mask = 0;
    for (int k = 0; k < 8; k++) /* each byte's 0x80 gathered into bit k of a byte */
        mask |= ((comma_bytes(load_le64(p + 8 * k)) >> 7) * 0x0102040810204080ULL >> 56) << (8 * k);
    return mask;
#endif
}

/* Where the block's back-references are: walked once, while counting. */
typedef struct {
    size_t at;        /* no comma before this is of interest */
    size_t word_at;   /* where the bytes of mask start */
    size_t next_word; /* the first byte not yet loaded into a mask */
    uint64_t mask;    /* the commas of the last loaded bytes not yet visited: bit k, byte k */
    size_t prev;      /* the previous comma, when have_prev */
    int have_prev;
} comma_scan;

/* The next comma in data[0..n) at or after s->at, or n when none is left. */
static inline size_t next_comma(const unsigned char *data, size_t n, comma_scan *s) {
    for (;;) {
        while (s->mask != 0) {
            size_t pos = s->word_at + (size_t)__builtin_ctzll(s->mask);
            s->mask &= s->mask - 1;
            if (pos >= s->at)
                return pos;
        }
        size_t from = s->next_word > s->at ? s->next_word : s->at;
        if (from >= n)
            return n;
        s->word_at = from;
        if (n - from >= 64) {
            s->mask = comma_mask64(data + from);
            s->next_word = from + 64;
        } else {
            for (size_t k = 0; k < n - from; k++)
                if (data[from + k] == ',')
                    s->mask |= (uint64_t)1 << k;
            s->next_word = n;
        }
    }
}

/* How many bytes from a and b on are equal, up to most (b > a; b + most <= n). */
static inline size_t same_length(const unsigned char *data, size_t n, size_t a, size_t b,
                                 size_t most) {
    size_t same = 0;
    while (same < most && b + same + 8 <= n) {
        uint64_t differ = load_le64(data + a + same) ^ load_le64(data + b + same);
        if (differ != 0) {
            same += (size_t)(__builtin_ctzll(differ) >> 3);
            return same < most ? same : most;
        }
        same += 8;
    }
    while (same < most && data[a + same] == data[b + same])
        same++;
    return same < most ? same : most;
}

/* The next back-reference in data[0..n) from s->at on: a comma whose text, for at least
   MATCH_MIN bytes (the comma included), repeats the text at the comma before it, within the
   window. 1 with *start, *length and *distance set, or 0 when there is none left. */
static inline int next_match(const unsigned char *data, size_t n, comma_scan *s, size_t *start,
                             size_t *length, size_t *distance) {
    for (;;) {
        size_t here = next_comma(data, n, s);
        if (here >= n) {
            s->at = n;
            return 0;
        }
        size_t before = s->prev;
        int had = s->have_prev;
        s->prev = here;
        s->have_prev = 1;
        s->at = here + 1;
        if (!had || here - before > WINDOW)
            continue;
        size_t most = n - here < MATCH_MAX ? n - here : MATCH_MAX;
        size_t same = same_length(data, n, before, here, most);
        if (same < MATCH_MIN)
            continue;
        *start = here;
        *length = same;
        *distance = here - before;
        s->at = here + same;
        return 1;
    }
}

/* v > 0 */
static inline int floor_log2(unsigned v) { return 31 - __builtin_clz(v); }

/* RFC 1951 section 3.2.5: the symbol of a match length (3-257) or distance (1-32768), and the
   extra bits that follow it. */
typedef struct {
    int symbol;
    int extra_bits;
    unsigned extra;
} coded_value;

static inline coded_value length_value(size_t length) {
    unsigned v = (unsigned)length - 3;
    if (v < 8)
        return (coded_value){257 + (int)v, 0, 0};
    int e = floor_log2(v) - 2; /* lengths 11-18 carry one extra bit, 19-34 two, ... */
    return (coded_value){257 + 4 * e + 4 + (int)((v >> e) - 4), e, v & ((1u << e) - 1)};
}

static inline coded_value distance_value(size_t distance) {
    unsigned u = (unsigned)distance - 1;
    if (u < 4)
        return (coded_value){(int)u, 0, 0};
    int e = floor_log2(u) - 1; /* distances 5-8 carry one extra bit, 9-16 two, ... */
    return (coded_value){2 * e + 2 + (int)((u >> e) - 2), e, u & ((1u << e) - 1)};
}

/* Huffman code lengths of at most max_bits for symbols 0..n-1 with these weights (0: the
   symbol does not occur and gets no code). The code is complete, as inflaters require: a
   lone occurring symbol is given a partner of the same length. */
static void code_lengths(const uint64_t *weight, int n, int max_bits, unsigned char *length) {
    int order[SYMBOLS_MAX]; /* occurring symbols, lightest first */
    int used = 0;
    memset(length, 0, (size_t)n);
    for (int s = 0; s < n; s++) {
        if (weight[s] == 0)
            continue;
        int at = used++;
        while (at > 0 && weight[order[at - 1]] > weight[s]) { /* stable: ties by symbol */
            order[at] = order[at - 1];
            at--;
        }
        order[at] = s;
    }
    if (used == 0)
        return;
    if (used == 1) {
        length[order[0]] = 1;
        length[order[0] == 0 ? 1 : 0] = 1;
        return;
    }
    /* Build the tree: leaves are nodes 0..used-1 (in weight order), joined nodes follow and
       come out in nondecreasing weight, so the two lightest are always at one of two queue
       heads. */
    uint64_t node_weight[2 * SYMBOLS_MAX];
    int parent[2 * SYMBOLS_MAX];
    for (int i = 0; i < used; i++)
        node_weight[i] = weight[order[i]];
    int next_leaf = 0, next_joined = used, made = used;
    while (made < 2 * used - 1) {
        int pick[2];
        for (int k = 0; k < 2; k++) {
            if (next_leaf < used &&
                (next_joined == made || node_weight[next_leaf] <= node_weight[next_joined]))
                pick[k] = next_leaf++;
            else
                pick[k] = next_joined++;
        }
        node_weight[made] = node_weight[pick[0]] + node_weight[pick[1]];
        parent[pick[0]] = parent[pick[1]] = made;
        made++;
    }
    /* Depths, root first (a parent always has a larger index), counted per length with the
       over-long ones cut to max_bits. */
    int depth[2 * SYMBOLS_MAX];
    int per_length[LITERAL_BITS_MAX + 1] = {0};
    depth[made - 1] = 0;
    for (int i = made - 2; i >= 0; i--)
        depth[i] = depth[parent[i]] + 1;
    for (int i = 0; i < used; i++)
        per_length[depth[i] < max_bits ? depth[i] : max_bits]++;
    /* Cutting made the lengths over-full (the Kraft sum, in units of 2^-max_bits, exceeds
       2^max_bits) by less than the number of cut leaves. Each step takes one leaf off the
       longest length and hangs it, with a leaf moved down from the deepest shorter length,
       one level below that leaf's old place: the sum drops by exactly one unit, so the
       loop ends on a complete code. */
    uint64_t kraft = 0;
    for (int bits = 1; bits <= max_bits; bits++)
        kraft += (uint64_t)per_length[bits] << (max_bits - bits);
    while (kraft > ((uint64_t)1 << max_bits)) {
        per_length[max_bits]--;
        for (int bits = max_bits - 1; bits > 0; bits--) {
            if (per_length[bits] > 0) {
                per_length[bits]--;
                per_length[bits + 1] += 2;
                break;
            }
        }
        kraft--;
    }
    /* The heaviest symbols take the shortest lengths. */
    int at = used - 1;
    for (int bits = 1; bits <= max_bits; bits++)
        for (int k = 0; k < per_length[bits]; k++)
            length[order[at--]] = (unsigned char)bits;
}


/* The canonical codes of RFC 1951 section 3.2.2 for these lengths, bit-reversed for a
   writer that fills bytes from their least significant bit. */
static void canonical_codes(const unsigned char *length, int n, uint16_t *code) {
    int per_length[LITERAL_BITS_MAX + 1] = {0};
    unsigned next[LITERAL_BITS_MAX + 2];
    for (int s = 0; s < n; s++)
        per_length[length[s]]++;
    per_length[0] = 0;
    unsigned value = 0;
    for (int bits = 1; bits <= LITERAL_BITS_MAX; bits++) {
        value = (value + (unsigned)per_length[bits - 1]) << 1;
        next[bits] = value;
    }
    for (int s = 0; s < n; s++) {
        int bits = length[s];
        if (bits == 0) {
            code[s] = 0;
            continue;
        }
        unsigned forward = next[bits]++, reversed = 0;
        for (int k = 0; k < bits; k++)
            reversed |= ((forward >> k) & 1u) << (bits - 1 - k);
        code[s] = (uint16_t)reversed;
    }
}


/* Bits appended to a byte array, least significant first (the header is small: a byte at a
   time is enough). */
typedef struct {
    unsigned char *bytes;
    size_t bits;
} bit_list;

static void put_bits(bit_list *list, unsigned value, int count) {
    for (int k = 0; k < count; k++, list->bits++) {
        unsigned char *byte = &list->bytes[list->bits >> 3];
        if ((list->bits & 7) == 0)
            *byte = 0;
        *byte |= (unsigned char)(((value >> k) & 1u) << (list->bits & 7));
    }
}

/* The code lengths of the literal and distance alphabets as the header's run-length
   symbols: symbol[i] with extra[i] in extra bits. Returns how many. */
static int run_length_symbols(const unsigned char *lengths, int n, unsigned char *symbol,
                              unsigned char *extra) {
    int count = 0;
    for (int i = 0; i < n;) {
        int run = 1;
        while (i + run < n && lengths[i + run] == lengths[i])
            run++;
        int left = run;
        if (lengths[i] == 0) {
            while (left >= 11) {
                int take = left < 138 ? left : 138;
                symbol[count] = 18, extra[count++] = (unsigned char)(take - 11);
                left -= take;
            }
            if (left >= 3) {
                symbol[count] = 17, extra[count++] = (unsigned char)(left - 3);
                left = 0;
            }
        } else {
            symbol[count] = lengths[i], extra[count++] = 0;
            left--;
            while (left >= 3) {
                int take = left < 6 ? left : 6;
                symbol[count] = 16, extra[count++] = (unsigned char)(take - 3);
                left -= take;
            }
        }
        for (; left > 0; left--)
            symbol[count] = lengths[i], extra[count++] = 0;
        i += run;
    }
    return count;
}


/* Appends a match to the code's list, growing it. 0, or -1 when out of memory. */
static int keep_match(bw_comma_code *code, size_t start, size_t length, size_t distance) {
    if (code->match_count == code->match_cap) {
        size_t cap = code->match_cap ? 2 * code->match_cap : 4096;
        bw_comma_match *grown = realloc(code->matches, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        code->matches = grown;
        code->match_cap = cap;
    }
    code->matches[code->match_count++] =
        (bw_comma_match){(uint32_t)start, (uint16_t)length, (uint16_t)(distance - 1)};
    return 0;
}

void bw_comma_code_free(bw_comma_code *code) {
    free(code->matches);
    code->matches = NULL;
    code->match_count = code->match_cap = 0;
}

int bw_comma_code_make(const unsigned char *data, size_t n, bw_comma_code *code) {
    uint64_t weight[BW_COMMA_LENGTH_SYMBOLS] = {0};
    uint64_t distance_weight[BW_COMMA_DISTANCE_SYMBOLS] = {0};
    uint64_t extra_total = 0;
    add_byte_counts(data, n, weight);
    comma_scan scan = {0, 0, 0, 0, 0, 0};
    size_t start, length, distance;
    code->match_count = 0;
    while (next_match(data, n, &scan, &start, &length, &distance)) {
        if (keep_match(code, start, length, distance) < 0)
            return -1;
        for (size_t k = 0; k < length; k++) /* these bytes are not literals after all */
            weight[data[start + k]]--;
        coded_value l = length_value(length), d = distance_value(distance);
        weight[l.symbol]++;
        distance_weight[d.symbol]++;
        extra_total += (uint64_t)l.extra_bits + (uint64_t)d.extra_bits;
    }
    weight[END_OF_BLOCK] = 1;

    /* Both alphabets' lengths in one row, as the header lists them. */
    enum { ROW = BW_COMMA_LENGTH_SYMBOLS + BW_COMMA_DISTANCE_SYMBOLS };
    unsigned char lengths[ROW];
    unsigned char *distance_lengths = lengths + BW_COMMA_LENGTH_SYMBOLS;
    code_lengths(weight, BW_COMMA_LENGTH_SYMBOLS, LITERAL_BITS_MAX, lengths);
    code_lengths(distance_weight, BW_COMMA_DISTANCE_SYMBOLS, LITERAL_BITS_MAX, distance_lengths);
    int any_distance = 0;
    for (int s = 0; s < BW_COMMA_DISTANCE_SYMBOLS; s++)
        any_distance |= distance_lengths[s];
    if (!any_distance) /* no match at all: some inflaters refuse an empty distance code, none
                          refuses a complete one (two codes of one bit each) */
        distance_lengths[0] = distance_lengths[1] = 1;
    uint16_t bits[BW_COMMA_LENGTH_SYMBOLS], distance_bits[BW_COMMA_DISTANCE_SYMBOLS];
    canonical_codes(lengths, BW_COMMA_LENGTH_SYMBOLS, bits);
    canonical_codes(distance_lengths, BW_COMMA_DISTANCE_SYMBOLS, distance_bits);
    uint64_t total = extra_total;
    for (int s = 0; s < BW_COMMA_LENGTH_SYMBOLS; s++) {
        code->entry[s] = (uint32_t)bits[s] | (uint32_t)lengths[s] << 16;
        total += weight[s] * lengths[s];
    }
    for (int s = 0; s < BW_COMMA_DISTANCE_SYMBOLS; s++) {
        code->distance_entry[s] = (uint32_t)distance_bits[s] | (uint32_t)distance_lengths[s] << 16;
        total += distance_weight[s] * distance_lengths[s];
    }

    unsigned char symbol[ROW], extra[ROW];
    int runs = run_length_symbols(lengths, ROW, symbol, extra);
    uint64_t symbol_weight[LENGTH_SYMBOLS] = {0};
    for (int i = 0; i < runs; i++)
        symbol_weight[symbol[i]]++;
    unsigned char length_bits[LENGTH_SYMBOLS];
    uint16_t length_code[LENGTH_SYMBOLS];
    code_lengths(symbol_weight, LENGTH_SYMBOLS, LENGTH_CODE_BITS_MAX, length_bits);
    canonical_codes(length_bits, LENGTH_SYMBOLS, length_code);
    int listed = LENGTH_SYMBOLS; /* trailing zero lengths, in the header's order, are left out */
    while (listed > 4 && length_bits[length_order[listed - 1]] == 0)
        listed--;

    bit_list header = {code->header, 0};
    put_bits(&header, 0, 1); /* BFINAL: more blocks follow */
    put_bits(&header, 2, 2); /* BTYPE: dynamic Huffman */
    put_bits(&header, BW_COMMA_LENGTH_SYMBOLS - 257, 5);  /* HLIT */
    put_bits(&header, BW_COMMA_DISTANCE_SYMBOLS - 1, 5);  /* HDIST */
    put_bits(&header, (unsigned)listed - 4, 4);           /* HCLEN */
    for (int i = 0; i < listed; i++)
        put_bits(&header, length_bits[length_order[i]], 3);
    static const unsigned char extra_bits[3] = {2, 3, 7}; /* of symbols 16, 17, 18 */
    for (int i = 0; i < runs; i++) {
        put_bits(&header, length_code[symbol[i]], length_bits[symbol[i]]);
        if (symbol[i] >= 16)
            put_bits(&header, extra[i], extra_bits[symbol[i] - 16]);
    }
    code->header_bits = header.bits;
    code->block_bits = header.bits + total;
    return 0;
}

/* The sync-flush marker after a block: an empty stored block (3 header bits, then the rest
   of the byte) and its LEN 0, NLEN 0xFFFF. */
#define MARKER_BITS 3
#define MARKER_TAIL 4

size_t bw_comma_block_size(const bw_comma_code *code) {
    return (size_t)((code->block_bits + MARKER_BITS + 7) / 8) + MARKER_TAIL;
}

/* The block's bits as they are written: after each flush fewer than 8 wait in acc, so up to
   56 more may go in before the next (three literal codes of at most 15 bits, or a length
   and a distance with their extra bits: at most 48). */
typedef struct {
    unsigned char *at;
    uint64_t acc;
    unsigned pending;
} bit_writer;

static inline void put_entry(bit_writer *w, uint32_t entry) {
    w->acc |= (uint64_t)(entry & 0xffff) << w->pending;
    w->pending += entry >> 16;
}

static inline void put_extra(bit_writer *w, unsigned value, int bits) {
    w->acc |= (uint64_t)value << w->pending;
    w->pending += (unsigned)bits;
}

/* Writes the whole bytes waiting, without a branch: all eight bytes of acc are stored (the
   output has room past the block's end for that), and at moves by the whole ones. */
static inline void flush(bit_writer *w) {
    uint64_t acc = w->acc;
    for (int k = 0; k < 8; k++)
        w->at[k] = (unsigned char)(acc >> (8 * k));
    w->at += w->pending >> 3;
    w->acc = acc >> (w->pending & ~7u);
    w->pending &= 7;
}

/* data[0..n) as literals, three codes per flush. */
static inline void put_literals(bit_writer *w, const uint32_t *entry, const unsigned char *data,
                                size_t n) {
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        put_entry(w, entry[data[i]]);
        put_entry(w, entry[data[i + 1]]);
        put_entry(w, entry[data[i + 2]]);
        flush(w);
    }
    for (; i < n; i++)
        put_entry(w, entry[data[i]]);
    flush(w);
}

/* Room past a block's last byte that flush may write into (and that is then overwritten or
   left beyond out->len). */
#define FLUSH_SLACK 8
/* Literals are written in runs of at most this many bytes, each after a check that the output
   has room for it at 15 bits a byte. The block's size was counted from the bytes as they were
   when its code was made; bytes a caller changes between the two passes (a buffer another
   thread writes while the GIL is released) may take longer codes than counted, and must never
   be written past the buffer. With the bytes unchanged the check never grows the buffer: the
   first reservation includes one run's worst case. */
#define LITERAL_RUN 4096
#define LITERAL_RUN_ROOM (LITERAL_RUN * LITERAL_BITS_MAX / 8 + 2 * FLUSH_SLACK)

/* The output grown to hold LITERAL_RUN_ROOM more bytes after its first `at` bytes (kept).
   The rare path of make_room, out of line so the writer's state stays in registers. */
static __attribute__((noinline)) int grow_output(bw_buf *out, size_t at) {
    out->len = at;
    return bw_buf_reserve(out, LITERAL_RUN_ROOM);
}

/* Room for LITERAL_RUN_ROOM more bytes at w->at, the output grown (and w->at moved with it)
   if needed. 0, or -1 when out of memory. */
static inline int make_room(bit_writer *w, bw_buf *out) {
    size_t at = (size_t)((char *)w->at - out->data);
    if (out->cap - at >= LITERAL_RUN_ROOM)
        return 0;
    if (grow_output(out, at) < 0)
        return -1;
    w->at = (unsigned char *)out->data + at;
    return 0;
}

/* data[0..n) as literals, in runs, each after make_room. 0, or -1 when out of memory. */
static inline int put_literal_runs(bit_writer *w, bw_buf *out, const uint32_t *entry,
                                   const unsigned char *data, size_t n) {
    while (n > 0) {
        size_t run = n < LITERAL_RUN ? n : LITERAL_RUN;
        if (make_room(w, out) < 0)
            return -1;
        put_literals(w, entry, data, run);
        data += run;
        n -= run;
    }
    return 0;
}

int bw_comma_block_write(const bw_comma_code *code, const unsigned char *data, size_t n,
                         bw_buf *out) {
    size_t start = out->len;
    if (bw_buf_reserve(out, bw_comma_block_size(code) + LITERAL_RUN_ROOM) < 0)
        return -1;
    bit_writer w;
    w.at = (unsigned char *)bw_buf_tail(out);
    /* the header's whole bytes, then its last partial byte's bits in the accumulator */
    size_t whole = code->header_bits >> 3;
    memcpy(w.at, code->header, whole);
    w.at += whole;
    w.pending = (unsigned)(code->header_bits & 7);
    w.acc = w.pending ? (uint64_t)(code->header[whole] & ((1u << w.pending) - 1)) : 0;
    size_t done = 0;
    for (size_t i = 0; i < code->match_count; i++) {
        const bw_comma_match *m = &code->matches[i];
        if (put_literal_runs(&w, out, code->entry, data + done, m->start - done) < 0)
            goto no_memory;
        if (make_room(&w, out) < 0) /* a run before it may have taken more than counted */
            goto no_memory;
        coded_value l = length_value(m->length),
                    d = distance_value((size_t)m->distance_less_one + 1);
        put_entry(&w, code->entry[l.symbol]);
        put_extra(&w, l.extra, l.extra_bits);
        put_entry(&w, code->distance_entry[d.symbol]);
        put_extra(&w, d.extra, d.extra_bits);
        flush(&w);
        done = (size_t)m->start + m->length;
    }
    if (put_literal_runs(&w, out, code->entry, data + done, n - done) < 0)
        goto no_memory;
    if (make_room(&w, out) < 0)
        goto no_memory;
    put_entry(&w, code->entry[END_OF_BLOCK]);
    w.pending += MARKER_BITS; /* the empty stored block's header: three 0 bits */
    while (w.pending > 0) {   /* the rest of the byte is padding */
        *w.at++ = (unsigned char)w.acc;
        w.acc >>= 8;
        w.pending = w.pending > 8 ? w.pending - 8 : 0;
    }
    static const unsigned char stored_empty[MARKER_TAIL] = {0x00, 0x00, 0xff, 0xff};
    memcpy(w.at, stored_empty, MARKER_TAIL);
    w.at += MARKER_TAIL;
    out->len = (size_t)((char *)w.at - out->data);
    return 0;
no_memory:
    out->len = start; /* nothing new */
    return -1;
}
