/* CQL types, the Arrow -> CQL schema check, and Arrow values as protocol [bytes]. */
#include "cql_values.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cql_wire.h"

/* ------------------------------------------------------------------ type names */

static const struct {
    const char *name;   /* CQL text */
    const char *marshal; /* org.apache.cassandra.db.marshal.<marshal> */
    uint16_t id;
} scalars[] = {
    {"ascii", "AsciiType", BW_CQL_T_ASCII},
    {"bigint", "LongType", BW_CQL_T_BIGINT},
    {"blob", "BytesType", BW_CQL_T_BLOB},
    {"boolean", "BooleanType", BW_CQL_T_BOOLEAN},
    {"counter", "CounterColumnType", BW_CQL_T_COUNTER},
    {"decimal", "DecimalType", BW_CQL_T_DECIMAL},
    {"double", "DoubleType", BW_CQL_T_DOUBLE},
    {"float", "FloatType", BW_CQL_T_FLOAT},
    {"int", "Int32Type", BW_CQL_T_INT},
    {"timestamp", "TimestampType", BW_CQL_T_TIMESTAMP},
    {"uuid", "UUIDType", BW_CQL_T_UUID},
    {"text", "UTF8Type", BW_CQL_T_VARCHAR},
    {"varchar", NULL, BW_CQL_T_VARCHAR},
    {"varint", "IntegerType", BW_CQL_T_VARINT},
    {"timeuuid", "TimeUUIDType", BW_CQL_T_TIMEUUID},
    {"inet", "InetAddressType", BW_CQL_T_INET},
    {"date", "SimpleDateType", BW_CQL_T_DATE},
    {"time", "TimeType", BW_CQL_T_TIME},
    {"smallint", "ShortType", BW_CQL_T_SMALLINT},
    {"tinyint", "ByteType", BW_CQL_T_TINYINT},
    {"duration", "DurationType", BW_CQL_T_DURATION},
};
#define N_SCALARS (sizeof scalars / sizeof scalars[0])
#define MARSHAL_PREFIX "org.apache.cassandra.db.marshal."

const char *bw_cql_type_name(uint16_t id) {
    for (size_t i = 0; i < N_SCALARS; i++)
        if (scalars[i].id == id)
            return scalars[i].name;
    return NULL;
}

/* Text between [p, end) without the blanks around it. */
static void trim(const char **p, const char **end) {
    while (*p < *end && isspace((unsigned char)**p))
        (*p)++;
    while (*end > *p && isspace((unsigned char)(*end)[-1]))
        (*end)--;
}

static int same_word(const char *p, const char *end, const char *word) {
    size_t n = (size_t)(end - p);
    if (strlen(word) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)p[i]) != word[i])
            return 0;
    return 1;
}

/* A scalar type by CQL name or by marshal class (with or without the package). -1: none. */
static int scalar_id(const char *p, const char *end) {
    size_t plen = strlen(MARSHAL_PREFIX);
    int marshal = (size_t)(end - p) > plen && memcmp(p, MARSHAL_PREFIX, plen) == 0;
    if (marshal)
        p += plen;
    for (size_t i = 0; i < N_SCALARS; i++) {
        if (marshal ? (scalars[i].marshal != NULL && (size_t)(end - p) == strlen(scalars[i].marshal)
                       && memcmp(p, scalars[i].marshal, (size_t)(end - p)) == 0)
                    : same_word(p, end, scalars[i].name))
            return scalars[i].id;
    }
    return -1;
}

/* "T, N" of a vector: the element and the dimension. */
static int vector_parts(const char *p, const char *end, bw_cql_type *t) {
    const char *comma = NULL;
    for (const char *q = end; q > p; q--)
        if (q[-1] == ',') {
            comma = q - 1;
            break;
        }
    if (comma == NULL)
        return -1;
    const char *ep = p, *eend = comma, *np = comma + 1, *nend = end;
    trim(&ep, &eend);
    trim(&np, &nend);
    int id = scalar_id(ep, eend);
    if (id < 0 || np == nend)
        return -1;
    int64_t n = 0;
    for (const char *q = np; q < nend; q++) {
        if (*q < '0' || *q > '9' || n > BW_CQL_MAX_DIMENSION)
            return -1;
        n = n * 10 + (*q - '0');
    }
    if (n < 1 || n > BW_CQL_MAX_DIMENSION)
        return -1;
    t->id = BW_CQL_T_VECTOR;
    t->element = (uint16_t)id;
    t->dimension = (int32_t)n;
    return 0;
}

int bw_cql_type_parse(const char *text, size_t n, bw_cql_type *t, char *err, size_t err_size) {
    const char *p = text, *end = text + n;
    trim(&p, &end);
    memset(t, 0, sizeof *t);
    int id = scalar_id(p, end);
    if (id >= 0) {
        t->id = (uint16_t)id;
        return 0;
    }
    static const char vec_class[] = MARSHAL_PREFIX "VectorType(";
    size_t vlen = sizeof vec_class - 1;
    if ((size_t)(end - p) > 7 && same_word(p, p + 7, "vector<") && end[-1] == '>') {
        if (vector_parts(p + 7, end - 1, t) == 0)
            return 0;
    } else if ((size_t)(end - p) > vlen && memcmp(p, vec_class, vlen) == 0 && end[-1] == ')') {
        if (vector_parts(p + vlen, end - 1, t) == 0)
            return 0;
    }
    snprintf(err, err_size, "unsupported CQL type '%.*s': expected a scalar type or "
             "vector<type, N> (N from 1 to %d)", (int)(n > 200 ? 200 : n), text,
             BW_CQL_MAX_DIMENSION);
    return -1;
}

void bw_cql_type_text(const bw_cql_type *t, char *out, size_t out_size) {
    if (t->id == BW_CQL_T_VECTOR) {
        const char *e = bw_cql_type_name(t->element);
        snprintf(out, out_size, "vector<%s, %d>", e ? e : "?", (int)t->dimension);
        return;
    }
    const char *name = bw_cql_type_name(t->id);
    static const struct { uint16_t id; const char *name; } others[] = {
        {BW_CQL_T_CUSTOM, "custom"}, {BW_CQL_T_LIST, "list"}, {BW_CQL_T_MAP, "map"},
        {BW_CQL_T_SET, "set"}, {BW_CQL_T_UDT, "udt"}, {BW_CQL_T_TUPLE, "tuple"},
    };
    for (size_t i = 0; name == NULL && i < sizeof others / sizeof others[0]; i++)
        if (others[i].id == t->id)
            name = others[i].name;
    if (name != NULL)
        snprintf(out, out_size, "%s", name);
    else
        snprintf(out, out_size, "type 0x%04x", (unsigned)t->id);
}

/* ------------------------------------------------------------------ the schema check */

static int int_width_of(uint16_t id) {
    switch (id) {
    case BW_CQL_T_TINYINT: return 1;
    case BW_CQL_T_SMALLINT: return 2;
    case BW_CQL_T_INT: return 4;
    case BW_CQL_T_BIGINT: return 8;
    default: return 0;
    }
}

static int signed_int_width(const char *f) {
    if (f[0] == '\0' || f[1] != '\0')
        return 0;
    switch (f[0]) {
    case 'c': return 1;
    case 's': return 2;
    case 'i': return 4;
    case 'l': return 8;
    default: return 0;
    }
}

static int is_format(const char *f, const char *a, const char *b) {
    return strcmp(f, a) == 0 || (b != NULL && strcmp(f, b) == 0);
}

/* The plan for (f, child, t), or -1 with *why set when there is none ("" or a hint). */
static int plan_of(const char *f, const char *child, const bw_cql_type *t, bw_cql_column *col,
                   const char **why) {
    *why = "";
    uint16_t id = t->id;
    int iw = int_width_of(id), sw = signed_int_width(f);
    if (iw > 0) {
        if (sw == 0 || sw > iw) {
            if (sw > iw)
                *why = "its values may not fit; cast the column to a narrower type only if "
                       "every value fits";
            return -1;
        }
        col->read = BW_CQL_READ_INT;
        col->src_width = sw;
        col->wire_width = iw;
        return 0;
    }
    switch (id) {
    case BW_CQL_T_FLOAT:
        if (strcmp(f, "f") != 0) {
            if (strcmp(f, "g") == 0)
                *why = "float64 values would be rounded; declare the column double or cast "
                       "to float32";
            return -1;
        }
        col->read = BW_CQL_READ_FLOAT32;
        col->wire_width = 4;
        return 0;
    case BW_CQL_T_DOUBLE:
        if (!is_format(f, "f", "g"))
            return -1;
        col->read = BW_CQL_READ_FLOAT64;
        col->src_width = f[0] == 'f' ? 4 : 8;
        col->wire_width = 8;
        return 0;
    case BW_CQL_T_BOOLEAN:
        if (strcmp(f, "b") != 0)
            return -1;
        col->read = BW_CQL_READ_BOOL;
        col->wire_width = 1;
        return 0;
    case BW_CQL_T_VARCHAR:
    case BW_CQL_T_ASCII:
        if (!is_format(f, "u", "U"))
            return -1;
        col->read = id == BW_CQL_T_ASCII ? BW_CQL_READ_ASCII : BW_CQL_READ_UTF8;
        col->large = f[0] == 'U';
        return 0;
    case BW_CQL_T_BLOB:
        if (strcmp(f, "w:16") == 0) {
            col->read = BW_CQL_READ_UUID; /* 16 bytes as they are */
            col->wire_width = 16;
            return 0;
        }
        if (!is_format(f, "z", "Z"))
            return -1;
        col->read = BW_CQL_READ_BINARY;
        col->large = f[0] == 'Z';
        return 0;
    case BW_CQL_T_UUID:
    case BW_CQL_T_TIMEUUID:
        if (strcmp(f, "w:16") != 0)
            return -1;
        col->read = BW_CQL_READ_UUID;
        col->wire_width = 16;
        return 0;
    case BW_CQL_T_TIMESTAMP:
        if (strcmp(f, "tdm") == 0 || strncmp(f, "tsm:", 4) == 0) {
            col->scale = 1;
        } else if (strncmp(f, "tss:", 4) == 0) {
            col->scale = 1000;
        } else {
            if (strncmp(f, "tsu:", 4) == 0 || strncmp(f, "tsn:", 4) == 0)
                *why = "a CQL timestamp holds milliseconds; cast the column to timestamp[ms] "
                       "if dropping the finer digits is acceptable";
            return -1;
        }
        col->read = BW_CQL_READ_TIMESTAMP;
        col->wire_width = 8;
        return 0;
    case BW_CQL_T_DATE:
        if (strcmp(f, "tdD") != 0)
            return -1;
        col->read = BW_CQL_READ_DATE;
        col->wire_width = 4;
        return 0;
    case BW_CQL_T_VECTOR: {
        int64_t n = bw_arrow_fixed_list_size(f);
        if (n < 0 && !is_format(f, "+l", "+L"))
            return -1;
        int element_width = int_width_of(t->element);
        const char *c = child != NULL ? child : "";
        if (element_width > 0) {
            /* integers as they are: the element's own width, no conversion */
            if (signed_int_width(c) != element_width) {
                if (signed_int_width(c) > 0)
                    *why = "the list's integers must have the element's width (int8 for "
                           "tinyint, int16 smallint, int32 int, int64 bigint)";
                return -1;
            }
            /* tinyint and smallint elements are each behind a one-byte vint length */
            element_width += element_width < 4;
        } else if (t->element == BW_CQL_T_FLOAT || t->element == BW_CQL_T_DOUBLE) {
            if (!(strcmp(c, "f") == 0 || (strcmp(c, "g") == 0 && t->element == BW_CQL_T_DOUBLE))) {
                if (strcmp(c, "g") == 0)
                    *why = "float64 values would be rounded; cast the values to float32";
                return -1;
            }
            element_width = t->element == BW_CQL_T_FLOAT ? 4 : 8;
        } else {
            *why = "vectors are bound from Arrow for float, double, tinyint, smallint, int and "
                   "bigint elements";
            return -1;
        }
        if (n >= 0 && n != t->dimension) {
            *why = "the dimensions differ";
            return -1;
        }
        col->read = BW_CQL_READ_VECTOR;
        col->wire_width = t->dimension * element_width;
        return 0;
    }
    default:
        *why = "bulkwire does not bind this CQL type from Arrow";
        return -1;
    }
}

int bw_cql_column_plan(const char *name, const char *format, const char *child_format,
                       const bw_cql_type *t, bw_cql_column *col, char *err, size_t err_size) {
    memset(col, 0, sizeof *col);
    col->type = *t;
    const char *why;
    if (plan_of(format ? format : "", child_format, t, col, &why) == 0)
        return 0;
    char words[128], cql[64];
    bw_arrow_type_words(format, child_format, words, sizeof words);
    bw_cql_type_text(t, cql, sizeof cql);
    snprintf(err, err_size, "column '%.100s': Arrow %s cannot be bound to CQL %s%s%s", name,
             words, cql, why[0] ? ": " : "", why);
    return -1;
}

int bw_cql_column_bind(bw_cql_column *col, const struct ArrowSchema *schema,
                       const struct ArrowArray *array, int64_t base, char *err,
                       size_t err_size) {
    col->array = array;
    col->base = base;
    if (col->read != BW_CQL_READ_VECTOR)
        return 0;
    if (col->fill == NULL) {
        snprintf(err, err_size, "no vector serializer for a vector column");
        return -1;
    }
    return bw_arrow_numeric_lists_view(schema, array, &col->vectors, err, err_size);
}

/* ------------------------------------------------------------------ values */

static inline void store_be(uint8_t *dst, uint64_t v, int width) {
    for (int i = width - 1; i >= 0; i--) {
        dst[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* A native-order signed integer of `width` bytes. */
static inline int64_t load_int(const uint8_t *p, int width) {
    switch (width) {
    case 1: { int8_t v; memcpy(&v, p, 1); return v; }
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* [start, end) of row i of a string/binary array, 32- or 64-bit offsets. */
static inline void span_of(const struct ArrowArray *a, int large, int64_t i, int64_t *start,
                           int64_t *end) {
    if (large) {
        const int64_t *o = (const int64_t *)a->buffers[1];
        *start = o[i];
        *end = o[i + 1];
    } else {
        const int32_t *o = (const int32_t *)a->buffers[1];
        *start = o[i];
        *end = o[i + 1];
    }
}

static int put_fixed(bw_buf *out, const uint8_t *v, int n, size_t *value_at, int32_t *len) {
    if (bw_cql_put_bytes(out, v, (size_t)n) < 0)
        return -1;
    *value_at = out->len - (size_t)n;
    *len = n;
    return 0;
}

int bw_cql_column_write(const bw_cql_column *col, int64_t r, bw_buf *out, size_t *value_at,
                        int32_t *value_len, char *err, size_t err_size) {
    const struct ArrowArray *a = col->array;
    r += col->base;
    int64_t i = a->offset + r;
    err[0] = '\0';
    if (col->read != BW_CQL_READ_VECTOR &&
        !bw_arrow_bit(a->null_count == 0 ? NULL : (const uint8_t *)a->buffers[0], i)) {
        *value_at = out->len;
        *value_len = -1;
        return bw_cql_put_int(out, col->null_unset ? -2 : -1) < 0 ? -1 : 0;
    }
    const uint8_t *values = a->n_buffers > 1 ? (const uint8_t *)a->buffers[1] : NULL;
    uint8_t v[16];
    switch (col->read) {
    case BW_CQL_READ_INT:
        store_be(v, (uint64_t)load_int(values + i * col->src_width, col->src_width),
                 col->wire_width);
        return put_fixed(out, v, col->wire_width, value_at, value_len);
    case BW_CQL_READ_FLOAT32: {
        uint32_t u;
        memcpy(&u, values + i * 4, 4);
        /* a signaling NaN comes out quiet, payload kept: the driver's float -> double ->
           float trip does the same */
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x003fffffu) != 0 && !(u & 0x00400000u))
            u |= 0x00400000u;
        store_be(v, u, 4);
        return put_fixed(out, v, 4, value_at, value_len);
    }
    case BW_CQL_READ_FLOAT64: {
        uint64_t bits;
        if (col->src_width == 4) {
            float f;
            memcpy(&f, values + i * 4, 4);
            double d = (double)f;
            memcpy(&bits, &d, 8);
        } else {
            memcpy(&bits, values + i * 8, 8);
        }
        store_be(v, bits, 8);
        return put_fixed(out, v, 8, value_at, value_len);
    }
    case BW_CQL_READ_BOOL:
        v[0] = (uint8_t)bw_arrow_bit(values, i);
        return put_fixed(out, v, 1, value_at, value_len);
    case BW_CQL_READ_UUID:
        return put_fixed(out, values + i * 16, 16, value_at, value_len);
    case BW_CQL_READ_TIMESTAMP: {
        int64_t x = load_int(values + i * 8, 8);
        if (x > INT64_MAX / col->scale || x < INT64_MIN / col->scale) {
            snprintf(err, err_size, "timestamp %lld s is out of the range of a CQL timestamp "
                     "(milliseconds in a signed 64-bit integer)", (long long)x);
            return -2;
        }
        store_be(v, (uint64_t)(x * col->scale), 8);
        return put_fixed(out, v, 8, value_at, value_len);
    }
    case BW_CQL_READ_DATE:
        store_be(v, (uint64_t)(load_int(values + i * 4, 4) + ((int64_t)1 << 31)), 4);
        return put_fixed(out, v, 4, value_at, value_len);
    case BW_CQL_READ_UTF8:
    case BW_CQL_READ_ASCII:
    case BW_CQL_READ_BINARY: {
        int64_t start, end;
        span_of(a, col->large, i, &start, &end);
        int64_t n = end - start;
        if (n > INT32_MAX) {
            snprintf(err, err_size, "a value of %lld bytes is longer than a CQL value may be "
                     "(2**31 - 1 bytes)", (long long)n);
            return -2;
        }
        const uint8_t *data = a->buffers[2] != NULL ? (const uint8_t *)a->buffers[2] + start
                                                    : (const uint8_t *)"";
        if (col->read == BW_CQL_READ_ASCII)
            for (int64_t k = 0; k < n; k++)
                if (data[k] >= 0x80) {
                    snprintf(err, err_size, "byte %lld of the value (0x%02x) is not ASCII, as a "
                             "CQL ascii value must be", (long long)k, data[k]);
                    return -2;
                }
        if (bw_cql_put_bytes(out, data, (size_t)n) < 0)
            return -1;
        *value_at = out->len - (size_t)n;
        *value_len = (int32_t)n;
        return 0;
    }
    case BW_CQL_READ_VECTOR: {
        const bw_arrow_vectors *vv = &col->vectors;
        int64_t first = 0, count = 0;
        if (bw_arrow_vectors_row(vv, r, &first, &count)) {
            *value_at = out->len;
            *value_len = -1;
            return bw_cql_put_int(out, col->null_unset ? -2 : -1) < 0 ? -1 : 0;
        }
        if (count != col->type.dimension) {
            snprintf(err, err_size, "the vector has %lld values, the column's type %d",
                     (long long)count, (int)col->type.dimension);
            return -2;
        }
        if (first < 0 || first > vv->values_length - count) {
            snprintf(err, err_size, "the list offsets reach past the values");
            return -2;
        }
        if (bw_arrow_vectors_has_null_value(vv, first, count)) {
            snprintf(err, err_size, "the vector holds a null value: CQL vectors cannot");
            return -2;
        }
        size_t n = (size_t)col->wire_width;
        if (bw_cql_put_int(out, (int32_t)n) < 0 || bw_buf_reserve(out, n) < 0)
            return -1;
        col->fill(col->fill_ctx, vv, first, bw_buf_tail(out));
        *value_at = out->len;
        *value_len = (int32_t)n;
        out->len += n;
        return 0;
    }
    }
    return -1;
}
