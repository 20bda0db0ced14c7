/* See json_array.h. No Python. */
#include "json_array.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "int_text.h"

static const int element_width[] = {
    [BW_NUM_BOOL] = 1, [BW_NUM_I8] = 1, [BW_NUM_I16] = 2, [BW_NUM_I32] = 4, [BW_NUM_I64] = 8,
    [BW_NUM_U8] = 1, [BW_NUM_U16] = 2, [BW_NUM_U32] = 4, [BW_NUM_U64] = 8,
    [BW_NUM_F16] = 2, [BW_NUM_F32] = 4, [BW_NUM_F64] = 8,
};

/* IEEE binary16 -> double, exact (every half is a double); saves linking npymath. */
static double half_to_double(uint16_t h) {
    int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude;
    if (exponent == 0)
        magnitude = ldexp((double)mantissa, -24);
    else if (exponent == 31)
        magnitude = mantissa ? NAN : INFINITY;
    else
        magnitude = ldexp((double)(mantissa | 0x400), exponent - 25);
    return sign ? -magnitude : magnitude;
}

/* The text of one native-order element at p, at dst (BW_FLOAT_TEXT_MAX bytes). Returns
   bytes written. */
static inline size_t number_text(bw_num_type type, const char *p, int float32_shortest,
                                 char *dst) {
    switch (type) {
    case BW_NUM_BOOL:
        if (*p) {
            memcpy(dst, "true", 4);
            return 4;
        }
        memcpy(dst, "false", 5);
        return 5;
#define SIGNED_CASE(t, ctype) \
    case t: { ctype v; memcpy(&v, p, sizeof v); return bw_i64_to_text((int64_t)v, dst); }
#define UNSIGNED_CASE(t, ctype) \
    case t: { ctype v; memcpy(&v, p, sizeof v); return bw_u64_to_text((uint64_t)v, dst); }
    SIGNED_CASE(BW_NUM_I8, int8_t)
    SIGNED_CASE(BW_NUM_I16, int16_t)
    SIGNED_CASE(BW_NUM_I32, int32_t)
    SIGNED_CASE(BW_NUM_I64, int64_t)
    UNSIGNED_CASE(BW_NUM_U8, uint8_t)
    UNSIGNED_CASE(BW_NUM_U16, uint16_t)
    UNSIGNED_CASE(BW_NUM_U32, uint32_t)
    UNSIGNED_CASE(BW_NUM_U64, uint64_t)
#undef SIGNED_CASE
#undef UNSIGNED_CASE
    case BW_NUM_F16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return bw_double_to_text(half_to_double(v), dst);
    }
    case BW_NUM_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return bw_float32_text(v, float32_shortest, dst);
    }
    default: { /* BW_NUM_F64 */
        double v;
        memcpy(&v, p, sizeof v);
        return bw_double_to_text(v, dst);
    }
    }
}

int bw_json_number(bw_buf *out, bw_num_type type, const char *p, int float32_shortest) {
    if (bw_buf_reserve(out, BW_FLOAT_TEXT_MAX) < 0)
        return -1;
    out->len += number_text(type, p, float32_shortest, bw_buf_tail(out));
    return 0;
}

/* The loop every array shape shares: `write` puts the element at p as text at q and
   returns its length. */
#define EACH_ELEMENT(write)                                                                   \
    for (size_t i = 0; i < n; i++, p += stride) {                                             \
        if (i) {                                                                              \
            q[0] = ',';                                                                       \
            q[1] = ' ';                                                                       \
            q += 2;                                                                           \
        }                                                                                     \
        q += (write);                                                                         \
    }

static inline float load_float(const char *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A native-order copy of the element at p, stored in the other byte order. */
static inline const char *reversed(const char *p, int width, char *tmp) {
    for (int i = 0; i < width; i++)
        tmp[i] = p[width - 1 - i];
    return tmp;
}

int bw_json_array(bw_buf *out, bw_num_type type, const char *p, size_t n, ptrdiff_t stride,
                  int swapped, int float32_shortest) {
    if (n > (SIZE_MAX - 2) / BW_JSON_ELEMENT_ROOM ||
        bw_buf_reserve(out, n * BW_JSON_ELEMENT_ROOM + 2) < 0)
        return -1;
    char *start = bw_buf_tail(out), *q = start;
    *q++ = '[';
    /* The embedding types get loops of their own: no per-element type switch. */
    if (swapped) {
        char tmp[8];
        int width = element_width[type];
        EACH_ELEMENT(number_text(type, reversed(p, width, tmp), float32_shortest, q))
    } else if (type == BW_NUM_F32 && !float32_shortest) {
        EACH_ELEMENT(bw_double_to_text((double)load_float(p), q))
    } else if (type == BW_NUM_F32) {
        EACH_ELEMENT(bw_float32_to_text(load_float(p), q))
    } else if (type == BW_NUM_F64) {
        q = bw_doubles_to_text(p, n, stride, q);
    } else {
        EACH_ELEMENT(number_text(type, p, float32_shortest, q))
    }
    *q++ = ']';
    out->len += (size_t)(q - start);
    return 0;
}

/* ---- pending runs ---- */

/* The header at the start of a run's room. Its room is always larger: 16 bytes fit in the
   26n + 2 bytes before the doubles. */
typedef struct {
    uint64_t count, next;
} run_header;

static size_t run_doubles_at(size_t n) { return BW_JSON_RUN_ROOM(n) - n * sizeof(double); }

char *bw_json_run_open(bw_buf *out, size_t n) {
    if (n == 0 || n > (SIZE_MAX - 2) / BW_JSON_ELEMENT_ROOM ||
        bw_buf_reserve(out, BW_JSON_RUN_ROOM(n)) < 0)
        return NULL;
    return bw_buf_tail(out) + run_doubles_at(n);
}

static void set_next(char *data, size_t run, size_t next) {
    uint64_t value = next;
    memcpy(data + run + offsetof(run_header, next), &value, sizeof value);
}

void bw_json_run_commit(bw_buf *out, bw_json_runs *runs, size_t n) {
    size_t at = out->len;
    run_header header = {n, BW_JSON_RUN_NONE};
    memcpy(out->data + at, &header, sizeof header);
    if (runs->last != BW_JSON_RUN_NONE)
        set_next(out->data, runs->last, at);
    else
        runs->first = at;
    runs->last = at;
    out->len += BW_JSON_RUN_ROOM(n);
}

void bw_json_runs_rollback(bw_json_runs *runs, char *data, bw_json_runs saved) {
    *runs = saved;
    if (saved.last != BW_JSON_RUN_NONE)
        set_next(data, saved.last, BW_JSON_RUN_NONE);
}

size_t bw_json_runs_settle(char *data, size_t len, size_t first) {
    /* `from` reads the pending layout, `to` writes the final one; to <= from throughout, and
       the text of a run (at most its room) written from `to` ends before any of its doubles
       that are still to be read (see the header). */
    size_t from = 0, to = 0, run = first;
    while (run != BW_JSON_RUN_NONE) {
        run_header header;
        memcpy(&header, data + run, sizeof header);
        size_t n = (size_t)header.count, room = BW_JSON_RUN_ROOM(n);
        memmove(data + to, data + from, run - from);
        to += run - from;
        /* the run's own room is the whole capacity: the writer never grows this view */
        bw_buf text = {.data = data + to, .len = 0, .cap = room, .regrow = NULL, .owner = NULL};
        (void)bw_json_array(&text, BW_NUM_F64, data + run + run_doubles_at(n), n,
                            (ptrdiff_t)sizeof(double), 0, 0);
        to += text.len;
        from = run + room;
        run = (size_t)header.next;
    }
    memmove(data + to, data + from, len - from);
    return to + (len - from);
}
