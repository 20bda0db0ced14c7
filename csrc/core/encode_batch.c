/* Arrow record batch rows -> bulk insert commands. See encode_batch.h. No Python. */
#include "encode_batch.h"

#include <stdio.h>
#include <string.h>

#include "float_text.h"
#include "int_text.h"
#include "json_string.h"

/* ------------------------------------------------------------------ Arrow element access */

static inline int bit_is_set(const uint8_t *bits, int64_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static inline int is_null(const bw_col *c, int64_t row) {
    return c->validity != NULL && !bit_is_set(c->validity, c->offset + row);
}

static inline int64_t int_value(const bw_col *c, int64_t row) {
    const char *p = (const char *)c->values + (c->offset + row) * c->width;
    switch (c->width) {
    case 1: { int8_t v; memcpy(&v, p, 1); return v; }
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

static inline uint64_t uint_value(const bw_col *c, int64_t row) {
    const char *p = (const char *)c->values + (c->offset + row) * c->width;
    switch (c->width) {
    case 1: { uint8_t v; memcpy(&v, p, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Start and end (in elements) of a string or list row. */
static inline void row_span(const bw_col *c, int64_t row, int large, int64_t *start, int64_t *end) {
    int64_t i = c->offset + row;
    if (large) {
        const int64_t *o = (const int64_t *)c->values;
        *start = o[i];
        *end = o[i + 1];
    } else {
        const int32_t *o = (const int32_t *)c->values;
        *start = o[i];
        *end = o[i + 1];
    }
}

static inline void string_at(const bw_col *c, int64_t row, const char **s, size_t *n) {
    int64_t start, end;
    row_span(c, row, c->kind == BW_COL_LARGE_UTF8, &start, &end);
    *s = c->data + start;
    *n = (size_t)(end - start);
}

static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Wall-clock seconds and microseconds of a timestamp row. */
static inline void timestamp_at(const bw_col *c, int64_t row, int64_t *seconds, int32_t *micros) {
    int64_t v = int_value(c, row);
    int64_t s = floor_div(v, c->per_second);
    int64_t sub = v - s * c->per_second; /* 0 <= sub < per_second */
    *micros = (int32_t)(c->per_second >= 1000000 ? sub / (c->per_second / 1000000)
                                                  : sub * (1000000 / c->per_second));
    *seconds = s + c->tz_offset;
}

/* ------------------------------------------------------------------ text writers */

/* Days since 1970-01-01 -> proleptic Gregorian date (Howard Hinnant's civil_from_days). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

size_t bw_datetime_text(int64_t seconds, int32_t micros, int naive, char *dst) {
    /* years 1..9999 span seconds -62135596800 .. 253402300799 */
    if (seconds < -62135596800LL || seconds > 253402300799LL)
        return 0;
    int64_t days = floor_div(seconds, 86400), sod = seconds - days * 86400, year;
    int month, day;
    civil_from_days(days, &year, &month, &day);
    int hour = (int)(sod / 3600), minute = (int)(sod / 60 % 60), second = (int)(sod % 60);
    char *p = dst;
    *p++ = '"';
    p += bw_u64_to_text((uint64_t)year, p);
    *p++ = '-'; bw_u32_to_fixed((uint32_t)month, 2, p); p += 2;
    *p++ = '-'; bw_u32_to_fixed((uint32_t)day, 2, p); p += 2;
    *p++ = 'T'; bw_u32_to_fixed((uint32_t)hour, 2, p); p += 2;
    *p++ = ':'; bw_u32_to_fixed((uint32_t)minute, 2, p); p += 2;
    *p++ = ':'; bw_u32_to_fixed((uint32_t)second, 2, p); p += 2;
    *p++ = '.'; bw_u32_to_fixed((uint32_t)micros, 6, p); p += 6;
    int is_max = naive && seconds == 253402300799LL && micros == 999999;
    *p++ = is_max ? '9' : '0';
    *p++ = '"';
    return (size_t)(p - dst);
}

/* Decodes UTF-8 into code points (scratch holds uint32_t). -1 on invalid input, else count. */
static int64_t utf8_decode(const uint8_t *s, size_t n, uint32_t *out) {
    size_t i = 0;
    int64_t k = 0;
    while (i < n) {
        uint32_t c = s[i];
        if (c < 0x80) { out[k++] = c; i++; continue; }
        int extra;
        uint32_t min;
        if ((c & 0xe0) == 0xc0) { extra = 1; c &= 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { extra = 2; c &= 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { extra = 3; c &= 0x07; min = 0x10000; }
        else return -1;
        if ((size_t)extra >= n - i)
            return -1;
        for (int j = 1; j <= extra; j++) {
            uint8_t cc = s[i + (size_t)j];
            if ((cc & 0xc0) != 0x80)
                return -1;
            c = (c << 6) | (cc & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return -1;
        out[k++] = c;
        i += (size_t)extra + 1;
    }
    return k;
}

static int utf8_valid(const char *s, size_t n, bw_buf *scratch) {
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0x80)
        i++;
    if (i == n)
        return 1;
    if (bw_buf_reserve(scratch, n * sizeof(uint32_t)) < 0)
        return -1;
    return utf8_decode((const uint8_t *)s + i, n - i, (uint32_t *)scratch->data) >= 0;
}

int bw_json_string_utf8_ascii(bw_buf *out, const char *s, size_t n, bw_buf *scratch) {
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0x80)
        i++;
    if (i == n) /* ASCII: the Latin-1 writer escapes exactly as json does */
        return bw_json_string_ucs1(out, (const uint8_t *)s, n);
    scratch->len = 0;
    if (bw_buf_reserve(scratch, n * sizeof(uint32_t)) < 0)
        return -1;
    uint32_t *units = (uint32_t *)scratch->data;
    int64_t k = utf8_decode((const uint8_t *)s, n, units);
    if (k < 0)
        return -2;
    return bw_json_string_ucs4(out, units, (size_t)k);
}

/* ------------------------------------------------------------------ validation */

static int fail(bw_batch_error *err, const bw_col *c, int64_t row, int type_error, const char *fmt,
                long long a, long long b) {
    err->row = row;
    err->column = c->name;
    err->is_type_error = type_error;
    snprintf(err->message, sizeof err->message, fmt, a, b);
    return -1;
}

/* Whether the UTF-8 text holds only characters that str.isspace() calls whitespace (none:
   1). The text must be valid UTF-8 (checked before). Most ids fail on their first byte. */
static int utf8_all_space(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if (!((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)))
                return 0;
            i += 1;
        } else if (c == 0xc2 && i + 1 < n) { /* U+0085, U+00A0 */
            if (s[i + 1] != 0x85 && s[i + 1] != 0xa0)
                return 0;
            i += 2;
        } else if ((c == 0xe1 || c == 0xe2 || c == 0xe3) && i + 2 < n) {
            uint32_t cp = ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[i + 1] & 0x3f) << 6) |
                          (uint32_t)(s[i + 2] & 0x3f);
            if (!(cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                  cp == 0x202f || cp == 0x205f || cp == 0x3000))
                return 0;
            i += 3;
        } else {
            return 0;
        }
    }
    return 1;
}

static int validate_id(const bw_batch_plan *p, bw_batch_error *err, bw_buf *scratch) {
    const bw_col *c = &p->id;
    for (int64_t r = 0; r < p->length; r++) {
        if (is_null(c, r))
            return fail(err, c, r, 0, "null id", 0, 0);
        if (c->kind != BW_COL_UTF8 && c->kind != BW_COL_LARGE_UTF8)
            continue;
        const char *s;
        size_t n;
        string_at(c, r, &s, &n);
        if (n == 0 && p->prefix_raw_len == 0)
            return fail(err, c, r, 0, "empty id", 0, 0);
        if ((n > 0 && s[n - 1] == '|') || (n == 0 && p->prefix_len > 0 && p->prefix[p->prefix_len - 1] == '|'))
            return fail(err, c, r, 0, "id ends with '|' (the server would generate the id)", 0, 0);
        int ok = utf8_valid(s, n, scratch);
        if (ok < 0)
            return fail(err, c, r, 0, "out of memory", 0, 0);
        if (!ok)
            return fail(err, c, r, 0, "id is not valid UTF-8", 0, 0);
        if (p->prefix_blank && utf8_all_space(s, n))
            return fail(err, c, r, 0, "id is only whitespace", 0, 0);
    }
    return 0;
}

static int validate_vector(const bw_col *c, bw_batch_error *err) {
    int64_t row = 0, bad_len = 0;
    bw_arrow_row_problem why = BW_ARROW_ROW_OK;
    if (bw_arrow_vectors_check(&c->vec, c->dim, &row, &why, &bad_len) == 0)
        return 0;
    switch (why) {
    case BW_ARROW_ROW_NULL:
        return fail(err, c, row, 0, "null vector", 0, 0);
    case BW_ARROW_ROW_WRONG_LENGTH:
        return fail(err, c, row, 0, "vector has %lld values, expected %lld (as in the first row)",
                    (long long)bad_len, (long long)c->dim);
    case BW_ARROW_ROW_NULL_VALUE: {
        int64_t first = 0, count = 0;
        bw_arrow_vectors_row(&c->vec, row, &first, &count);
        int64_t j = 0;
        while (j < count && !bw_arrow_vectors_has_null_value(&c->vec, first + j, 1))
            j++;
        return fail(err, c, row, 0, "null value at position %lld of the vector", (long long)j, 0);
    }
    default:
        return fail(err, c, row, 0, "malformed Arrow array: list offsets out of range", 0, 0);
    }
}

int bw_batch_validate(const bw_batch_plan *p, bw_batch_error *err) {
    bw_buf scratch;
    if (bw_buf_init(&scratch, 64) < 0) {
        err->row = -1;
        err->column = p->id.name;
        err->is_type_error = 0;
        snprintf(err->message, sizeof err->message, "out of memory");
        return -1;
    }
    int rc = validate_id(p, err, &scratch);
    for (size_t f = 0; rc == 0 && f < p->n_fields; f++) {
        const bw_col *c = &p->fields[f];
        if (c->kind == BW_COL_VECTOR) {
            rc = validate_vector(c, err);
        } else if (c->kind == BW_COL_UTF8 || c->kind == BW_COL_LARGE_UTF8) {
            for (int64_t r = 0; rc == 0 && r < p->length; r++) {
                if (is_null(c, r))
                    continue;
                const char *s;
                size_t n;
                string_at(c, r, &s, &n);
                int ok = utf8_valid(s, n, &scratch);
                if (ok <= 0)
                    rc = fail(err, c, r, 0, ok < 0 ? "out of memory" : "string is not valid UTF-8", 0, 0);
            }
        } else if (c->kind == BW_COL_TIMESTAMP) {
            char text[40];
            for (int64_t r = 0; rc == 0 && r < p->length; r++) {
                if (is_null(c, r))
                    continue;
                int64_t s;
                int32_t us;
                timestamp_at(c, r, &s, &us);
                if (bw_datetime_text(s, us, 1, text) == 0)
                    rc = fail(err, c, r, 0, "timestamp %lld is outside datetime's years 1..9999",
                              (long long)int_value(c, r), 0);
            }
        }
    }
    bw_buf_free(&scratch);
    return rc;
}

/* ------------------------------------------------------------------ writing */

#define ELEMENT_ROOM (BW_FLOAT_TEXT_MAX + 2)

static int write_vector(const bw_col *c, int64_t row, int shortest, bw_buf *out) {
    int64_t first = 0, count = 0;
    bw_arrow_vectors_row(&c->vec, row, &first, &count); /* validated: not null */
    if (bw_buf_reserve(out, (size_t)count * ELEMENT_ROOM + 2) < 0)
        return -1;
    char *dst = bw_buf_tail(out), *p = dst;
    *p++ = '[';
    if (c->vec.value_format == 'g') {
        const double *v = (const double *)(const void *)c->vec.values + first;
        for (int64_t j = 0; j < count; j++) {
            if (j) { *p++ = ','; *p++ = ' '; }
            p += bw_double_to_text(v[j], p);
        }
    } else if (shortest) {
        const float *v = (const float *)(const void *)c->vec.values + first;
        for (int64_t j = 0; j < count; j++) {
            if (j) { *p++ = ','; *p++ = ' '; }
            p += bw_float32_to_text(v[j], p);
        }
    } else {
        const float *v = (const float *)(const void *)c->vec.values + first;
        for (int64_t j = 0; j < count; j++) {
            if (j) { *p++ = ','; *p++ = ' '; }
            p += bw_double_to_text((double)v[j], p);
        }
    }
    *p++ = ']';
    out->len += (size_t)(p - dst);
    return 0;
}

static int write_value(const bw_col *c, int64_t row, int shortest, bw_buf *out, bw_buf *scratch) {
    if (c->kind == BW_COL_NULL || is_null(c, row))
        return BW_BUF_APPEND_LITERAL(out, "null");
    if (bw_buf_reserve(out, 40) < 0)
        return -1;
    char *dst = bw_buf_tail(out);
    switch (c->kind) {
    case BW_COL_INT:
        out->len += bw_i64_to_text(int_value(c, row), dst);
        return 0;
    case BW_COL_UINT:
        out->len += bw_u64_to_text(uint_value(c, row), dst);
        return 0;
    case BW_COL_FLOAT32: {
        float v;
        memcpy(&v, (const char *)c->values + (c->offset + row) * 4, 4);
        out->len += bw_double_to_text((double)v, dst);
        return 0;
    }
    case BW_COL_FLOAT64: {
        double v;
        memcpy(&v, (const char *)c->values + (c->offset + row) * 8, 8);
        out->len += bw_double_to_text(v, dst);
        return 0;
    }
    case BW_COL_BOOL:
        if (bit_is_set((const uint8_t *)c->values, c->offset + row)) {
            bw_buf_put(out, "true", 4);
        } else {
            bw_buf_put(out, "false", 5);
        }
        return 0;
    case BW_COL_TIMESTAMP: {
        int64_t s;
        int32_t us;
        timestamp_at(c, row, &s, &us);
        out->len += bw_datetime_text(s, us, !c->has_tz, dst);
        return 0;
    }
    case BW_COL_UTF8:
    case BW_COL_LARGE_UTF8: {
        const char *s;
        size_t n;
        string_at(c, row, &s, &n);
        return bw_json_string_utf8_ascii(out, s, n, scratch) == -1 ? -1 : 0;
    }
    case BW_COL_VECTOR:
        return write_vector(c, row, shortest, out);
    default:
        return BW_BUF_APPEND_LITERAL(out, "null");
    }
}

int bw_batch_write_row(const bw_batch_plan *p, int64_t row, bw_buf *out, bw_buf *scratch) {
    /* {"Id":"<prefix><id>","Type":"PUT","Document":{ */
    if (BW_BUF_APPEND_LITERAL(out, "{\"Id\":\"") < 0 || bw_buf_append(out, p->prefix, p->prefix_len) < 0)
        return -1;
    const bw_col *id = &p->id;
    if (id->kind == BW_COL_INT || id->kind == BW_COL_UINT) {
        if (bw_buf_reserve(out, BW_INT_TEXT_MAX) < 0)
            return -1;
        char *dst = bw_buf_tail(out);
        out->len += id->kind == BW_COL_INT ? bw_i64_to_text(int_value(id, row), dst)
                                           : bw_u64_to_text(uint_value(id, row), dst);
    } else {
        const char *s;
        size_t n;
        string_at(id, row, &s, &n);
        /* escape without the quotes: write the quoted form, then drop both quotes */
        size_t at = out->len;
        if (bw_json_string_utf8_ascii(out, s, n, scratch) != 0)
            return -1;
        memmove(out->data + at, out->data + at + 1, out->len - at - 2);
        out->len -= 2;
    }
    if (BW_BUF_APPEND_LITERAL(out, "\",\"Type\":\"PUT\",\"Document\":{") < 0)
        return -1;
    for (size_t f = 0; f < p->n_fields; f++) {
        const bw_col *c = &p->fields[f];
        if (bw_buf_append(out, c->key, c->key_len) < 0 ||
            write_value(c, row, p->float32_shortest, out, scratch) < 0 ||
            BW_BUF_APPEND_LITERAL(out, ", ") < 0)
            return -1;
    }
    if (BW_BUF_APPEND_LITERAL(out, "\"@metadata\": ") < 0 ||
        bw_buf_append(out, p->metadata, p->metadata_len) < 0 || BW_BUF_APPEND_LITERAL(out, "}}") < 0)
        return -1;
    return 0;
}
