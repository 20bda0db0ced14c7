/* Arrow record batch rows -> bulk insert commands. See encode_batch.h. No Python. */
#include "encode_batch.h"

#include <stdio.h>
#include <string.h>

#include "datetime_text.h"
#include "document_id.h"
#include "float_text.h"
#include "int_text.h"
#include "json_array.h"
#include "json_string.h"
#include "put_command.h"

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

/* The wall clock of a timestamp row. 0, or -1 when its year is outside 1..9999. Any int64
   is read without overflow: the second is floored by adjusting the truncated quotient (the
   product of the floored second and the unit may leave int64 at its ends), and a wall clock
   past int64 is far outside those years. */
static inline int timestamp_at(const bw_col *c, int64_t row, bw_civil_time *t) {
    int64_t v = int_value(c, row);
    int64_t s = v / c->per_second, sub = v % c->per_second;
    if (sub < 0) { /* 0 <= sub < per_second */
        sub += c->per_second;
        s -= 1;
    }
    if (c->tz_offset > 0 ? s > INT64_MAX - c->tz_offset : s < INT64_MIN - c->tz_offset)
        return -1;
    int32_t micros = (int32_t)(c->per_second >= 1000000 ? sub / (c->per_second / 1000000)
                                                         : sub * (1000000 / c->per_second));
    return bw_civil_time_from_epoch(s + c->tz_offset, micros, t);
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

static int validate_id(const bw_batch_plan *p, bw_batch_error *err) {
    const bw_col *c = &p->id;
    for (int64_t r = 0; r < p->length; r++) {
        if (is_null(c, r))
            return fail(err, c, r, 0, "null id", 0, 0);
        if (c->kind != BW_COL_UTF8 && c->kind != BW_COL_LARGE_UTF8)
            continue; /* digits after the prefix: never empty, blank or ending in '|' */
        const char *s;
        size_t n;
        string_at(c, r, &s, &n);
        bw_id_problem problem = bw_document_id_check(p->prefix_raw, p->prefix_raw_len, s, n);
        if (problem != BW_ID_OK) {
            err->row = r;
            err->column = c->name;
            err->is_type_error = 0;
            snprintf(err->message, sizeof err->message, "id %s", bw_document_id_problem_text(problem));
            return -1;
        }
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
    int rc = validate_id(p, err);
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
                if (!bw_utf8_valid(s, n))
                    rc = fail(err, c, r, 0, "string is not valid UTF-8", 0, 0);
            }
        } else if (c->kind == BW_COL_TIMESTAMP) {
            for (int64_t r = 0; rc == 0 && r < p->length; r++) {
                bw_civil_time t;
                if (!is_null(c, r) && timestamp_at(c, r, &t) < 0)
                    rc = fail(err, c, r, 0, "timestamp %lld is outside datetime's years 1..9999",
                              (long long)int_value(c, r), 0);
            }
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ writing */

static int write_vector(const bw_col *c, int64_t row, int shortest, bw_buf *out) {
    int64_t first = 0, count = 0;
    bw_arrow_vectors_row(&c->vec, row, &first, &count); /* validated: not null */
    bw_num_type type = c->vec.value_format == 'g' ? BW_NUM_F64 : BW_NUM_F32;
    return bw_json_array(out, type, c->vec.values + first * c->vec.value_width, (size_t)count,
                         c->vec.value_width, 0, shortest);
}

static int write_value(const bw_col *c, int64_t row, int shortest, bw_buf *out) {
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
        out->len += bw_float32_text(v, 0, dst); /* widened, as float32.item() gives it */
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
        bw_civil_time t;
        (void)timestamp_at(c, row, &t); /* validated: in range */
        out->len += bw_datetime_text(&t, !c->has_tz, dst);
        return 0;
    }
    case BW_COL_UTF8:
    case BW_COL_LARGE_UTF8: {
        const char *s;
        size_t n;
        string_at(c, row, &s, &n);
        return bw_json_string_utf8_ascii(out, s, n) == -1 ? -1 : 0;
    }
    case BW_COL_VECTOR:
        return write_vector(c, row, shortest, out);
    default:
        return BW_BUF_APPEND_LITERAL(out, "null");
    }
}

int bw_batch_write_row(const bw_batch_plan *p, int64_t row, bw_buf *out) {
    if (bw_put_command_open(out) < 0 || bw_buf_append(out, "\"", 1) < 0 ||
        bw_buf_append(out, p->prefix, p->prefix_len) < 0)
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
        /* escape without the quotes: write the quoted form, then drop both quotes. Raw UTF-8,
           as the official client writes a command's id */
        size_t at = out->len;
        if (bw_json_string_utf8(out, s, n) != 0)
            return -1;
        memmove(out->data + at, out->data + at + 1, out->len - at - 2);
        out->len -= 2;
    }
    if (bw_buf_append(out, "\"", 1) < 0 || bw_put_command_document(out) < 0 ||
        bw_buf_append(out, "{", 1) < 0)
        return -1;
    for (size_t f = 0; f < p->n_fields; f++) {
        const bw_col *c = &p->fields[f];
        if ((f > 0 && BW_BUF_APPEND_LITERAL(out, ", ") < 0) ||
            bw_buf_append(out, c->key, c->key_len) < 0 ||
            write_value(c, row, p->float32_shortest, out) < 0)
            return -1;
    }
    if (bw_put_command_metadata(out, p->n_fields > 0) < 0 ||
        bw_buf_append(out, p->metadata, p->metadata_len) < 0 || bw_put_command_close(out) < 0)
        return -1;
    return 0;
}
