#include "arrow_c.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bw_arrow_schema_release(struct ArrowSchema *s) {
    if (s != NULL && s->release != NULL) {
        s->release(s);
        s->release = NULL;
    }
}

void bw_arrow_array_release(struct ArrowArray *a) {
    if (a != NULL && a->release != NULL) {
        a->release(a);
        a->release = NULL;
    }
}

void bw_arrow_stream_release(struct ArrowArrayStream *s) {
    if (s != NULL && s->release != NULL) {
        s->release(s);
        s->release = NULL;
    }
}

int bw_arrow_primitive_width(const char *format) {
    if (format == NULL || format[0] == '\0' || format[1] != '\0')
        return 0;
    switch (format[0]) {
    case 'c': case 'C': return 1;
    case 'e': case 's': case 'S': return 2;
    case 'f': case 'i': case 'I': return 4;
    case 'g': case 'l': case 'L': return 8;
    default: return 0;
    }
}

int64_t bw_arrow_fixed_list_size(const char *format) {
    if (format == NULL || strncmp(format, "+w:", 3) != 0)
        return -1;
    const char *p = format + 3;
    if (*p < '0' || *p > '9')
        return -1;
    int64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > (INT64_MAX - 9) / 10)
            return -1;
        n = n * 10 + (*p - '0');
    }
    return *p == '\0' ? n : -1;
}

/* The words of a format that needs no parameter or child, or NULL. */
static const char *plain_type_words(const char *f) {
    static const struct { const char *format, *words; } names[] = {
        {"n", "null"}, {"b", "bool"}, {"c", "int8"}, {"C", "uint8"}, {"s", "int16"},
        {"S", "uint16"}, {"i", "int32"}, {"I", "uint32"}, {"l", "int64"}, {"L", "uint64"},
        {"e", "float16"}, {"f", "float32"}, {"g", "float64"}, {"z", "binary"},
        {"Z", "large_binary"}, {"vz", "binary_view"}, {"u", "string"}, {"U", "large_string"},
        {"vu", "string_view"}, {"tdD", "date32[day]"}, {"tdm", "date64[ms]"},
        {"tts", "time32[s]"}, {"ttm", "time32[ms]"}, {"ttu", "time64[us]"},
        {"ttn", "time64[ns]"}, {"tDs", "duration[s]"}, {"tDm", "duration[ms]"},
        {"tDu", "duration[us]"}, {"tDn", "duration[ns]"}, {"tiM", "month_interval"},
        {"tiD", "day_time_interval"}, {"tin", "month_day_nano_interval"}, {"+s", "struct"},
        {"+m", "map"}, {"+ud", "dense_union"}, {"+us", "sparse_union"}, {"+r", "run_end_encoded"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f, names[i].format) == 0)
            return names[i].words;
    return NULL;
}

void bw_arrow_type_words(const char *format, const char *child_format, char *out,
                         size_t out_size) {
    if (out_size == 0)
        return;
    const char *f = format != NULL ? format : "";
    const char *plain = plain_type_words(f);
    char value[64] = "?";
    if (child_format != NULL) {
        const char *child = plain_type_words(child_format);
        snprintf(value, sizeof value, child != NULL ? "%s" : "Arrow format '%.30s'",
                 child != NULL ? child : child_format);
    }
    if (plain != NULL)
        snprintf(out, out_size, "%s", plain);
    else if (strcmp(f, "+l") == 0 || strcmp(f, "+L") == 0 || strcmp(f, "+vl") == 0 ||
             strcmp(f, "+vL") == 0)
        snprintf(out, out_size, "%s<%s>", f[1] == 'v' ? (f[2] == 'l' ? "list_view" : "large_list_view")
                                                      : (f[1] == 'l' ? "list" : "large_list"), value);
    else if (bw_arrow_fixed_list_size(f) >= 0)
        snprintf(out, out_size, "fixed_size_list<%s, %lld>", value,
                 (long long)bw_arrow_fixed_list_size(f));
    else if (strncmp(f, "w:", 2) == 0)
        snprintf(out, out_size, "fixed_size_binary[%.20s]", f + 2);
    else if (strncmp(f, "d:", 2) == 0)
        snprintf(out, out_size, "decimal(%.40s)", f + 2);
    else if (strncmp(f, "ts", 2) == 0 && strchr("smun", f[2]) != NULL && f[2] != '\0' &&
             f[3] == ':') {
        const char *unit = f[2] == 's' ? "s" : f[2] == 'm' ? "ms" : f[2] == 'u' ? "us" : "ns";
        if (f[4] != '\0')
            snprintf(out, out_size, "timestamp[%s, tz=%.40s]", unit, f + 4);
        else
            snprintf(out, out_size, "timestamp[%s]", unit);
    } else
        snprintf(out, out_size, "Arrow format '%.40s'", f);
}

void bw_arrow_schema_words(const struct ArrowSchema *schema, char *out, size_t out_size) {
    if (schema != NULL && schema->dictionary != NULL && out_size > 0) {
        char values[64], indices[32];
        bw_arrow_schema_words(schema->dictionary, values, sizeof values);
        bw_arrow_type_words(schema->format, NULL, indices, sizeof indices);
        snprintf(out, out_size, "dictionary<values=%s, indices=%s>", values, indices);
        return;
    }
    const char *child = NULL;
    if (schema != NULL && schema->n_children == 1 && schema->children != NULL &&
        schema->children[0] != NULL)
        child = schema->children[0]->format;
    bw_arrow_type_words(schema != NULL ? schema->format : NULL, child, out, out_size);
}

static int list_view(const struct ArrowSchema *schema, const struct ArrowArray *array,
                     bw_arrow_vectors *v, int integers, char *err, size_t err_size);

int bw_arrow_vectors_view(const struct ArrowSchema *schema, const struct ArrowArray *array,
                          bw_arrow_vectors *v, char *err, size_t err_size) {
    return list_view(schema, array, v, 0, err, err_size);
}

int bw_arrow_numeric_lists_view(const struct ArrowSchema *schema,
                                const struct ArrowArray *array, bw_arrow_vectors *v, char *err,
                                size_t err_size) {
    return list_view(schema, array, v, 1, err, err_size);
}

/* The view of both: float32/float64 values, and with `integers` also int8..int64. */
static int list_view(const struct ArrowSchema *schema, const struct ArrowArray *array,
                     bw_arrow_vectors *v, int integers, char *err, size_t err_size) {
    memset(v, 0, sizeof *v);
    const char *fmt = schema->format ? schema->format : "";
    int64_t list_size = -1;
    if (strcmp(fmt, "+l") == 0) {
        v->kind = BW_ARROW_LIST;
    } else if (strcmp(fmt, "+L") == 0) {
        v->kind = BW_ARROW_LARGE_LIST;
    } else if ((list_size = bw_arrow_fixed_list_size(fmt)) >= 0) {
        v->kind = BW_ARROW_FIXED_SIZE_LIST;
    } else {
        char words[96];
        bw_arrow_schema_words(schema, words, sizeof words);
        snprintf(err, err_size, "expected an Arrow fixed_size_list, list or large_list of "
                 "float32/float64, got %s", words);
        return -1;
    }
    if (schema->n_children != 1 || array->n_children != 1 || schema->children == NULL ||
        array->children == NULL || schema->children[0] == NULL || array->children[0] == NULL) {
        char words[96];
        bw_arrow_type_words(fmt, NULL, words, sizeof words);
        snprintf(err, err_size, "malformed Arrow %s array: expected one child", words);
        return -1;
    }
    const struct ArrowSchema *child_schema = schema->children[0];
    const struct ArrowArray *child = array->children[0];
    const char *cfmt = child_schema->format ? child_schema->format : "";
    int is_float = strcmp(cfmt, "f") == 0 || strcmp(cfmt, "g") == 0;
    int is_int = cfmt[0] != '\0' && cfmt[1] == '\0' && strchr("csil", cfmt[0]) != NULL;
    if (!is_float && !(integers && is_int)) {
        char words[96];
        bw_arrow_schema_words(schema, words, sizeof words);
        snprintf(err, err_size, "expected Arrow list values of float32 or float64%s, got %s",
                 integers ? " or signed integers" : "", words);
        return -1;
    }
    if (child_schema->dictionary != NULL) {
        snprintf(err, err_size, "dictionary-encoded Arrow list values are not supported");
        return -1;
    }
    int expected_buffers = v->kind == BW_ARROW_FIXED_SIZE_LIST ? 1 : 2;
    if (array->n_buffers != expected_buffers || child->n_buffers != 2 || array->buffers == NULL ||
        child->buffers == NULL || array->length < 0 || array->offset < 0 || child->offset < 0 ||
        child->length < 0) {
        char words[96];
        bw_arrow_schema_words(schema, words, sizeof words);
        snprintf(err, err_size, "malformed Arrow %s array", words);
        return -1;
    }
    v->value_format = cfmt[0];
    v->value_width = bw_arrow_primitive_width(cfmt);
    v->length = array->length;
    v->list_size = list_size;
    v->validity = array->null_count == 0 ? NULL : (const uint8_t *)array->buffers[0];
    v->validity_offset = array->offset;
    if (v->kind == BW_ARROW_LIST)
        v->offsets32 = (const int32_t *)array->buffers[1] + array->offset;
    else if (v->kind == BW_ARROW_LARGE_LIST)
        v->offsets64 = (const int64_t *)array->buffers[1] + array->offset;
    else if (list_size > 0 && array->offset > INT64_MAX / list_size) {
        snprintf(err, err_size, "malformed Arrow array: offset too large");
        return -1;
    }
    if ((v->kind != BW_ARROW_FIXED_SIZE_LIST && array->length > 0 && array->buffers[1] == NULL)) {
        snprintf(err, err_size, "malformed Arrow list array: no offsets buffer");
        return -1;
    }
    /* A fixed_size_list's parent offset counts rows: skip offset * N child values. */
    int64_t skip = v->kind == BW_ARROW_FIXED_SIZE_LIST ? array->offset * list_size : 0;
    int64_t first_value = child->offset + skip;
    v->values = (const char *)child->buffers[1];
    if (v->values != NULL)
        v->values += first_value * v->value_width;
    v->values_length = child->length - skip;
    v->value_validity = child->null_count == 0 ? NULL : (const uint8_t *)child->buffers[0];
    v->value_validity_offset = first_value;
    v->value_null_count = child->null_count;
    if (v->kind == BW_ARROW_FIXED_SIZE_LIST && list_size > 0 &&
        v->values_length / list_size < v->length) {
        snprintf(err, err_size, "malformed Arrow fixed_size_list: too few values");
        return -1;
    }
    return 0;
}

int bw_arrow_vectors_has_null_value(const bw_arrow_vectors *v, int64_t first, int64_t count) {
    if (v->value_validity == NULL)
        return 0;
    for (int64_t k = first; k < first + count; k++)
        if (!bw_arrow_bit(v->value_validity, v->value_validity_offset + k))
            return 1;
    return 0;
}

int bw_arrow_vectors_check(const bw_arrow_vectors *v, int64_t dimension, int64_t *bad_row,
                           bw_arrow_row_problem *why, int64_t *bad_len) {
    for (int64_t r = 0; r < v->length; r++) {
        int64_t first, count;
        if (bw_arrow_vectors_row(v, r, &first, &count)) {
            *bad_row = r;
            *why = BW_ARROW_ROW_NULL;
            return -1;
        }
        if (dimension >= 0 && count != dimension) {
            *bad_row = r;
            *why = BW_ARROW_ROW_WRONG_LENGTH;
            *bad_len = count;
            return -1;
        }
        if (first < 0 || count < 0 || first > v->values_length - count) {
            *bad_row = r;
            *why = BW_ARROW_ROW_BAD_OFFSETS;
            return -1;
        }
        if (bw_arrow_vectors_has_null_value(v, first, count)) {
            *bad_row = r;
            *why = BW_ARROW_ROW_NULL_VALUE;
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ validation */

typedef enum {
    LAYOUT_OTHER,        /* a format bulkwire never reads: the generic rules only */
    LAYOUT_NULL,         /* "n": no buffers at all */
    LAYOUT_BOOL,         /* validity, bits */
    LAYOUT_FIXED,        /* validity, fixed-width values */
    LAYOUT_BINARY,       /* validity, int32 offsets, data */
    LAYOUT_LARGE_BINARY, /* validity, int64 offsets, data */
    LAYOUT_LIST,         /* validity, int32 offsets; one child */
    LAYOUT_LARGE_LIST,   /* validity, int64 offsets; one child */
    LAYOUT_FIXED_LIST,   /* validity; one child holding N values per row */
    LAYOUT_STRUCT,       /* validity; children holding offset + length rows each */
} layout;

static layout layout_of(const char *f, int64_t *list_size) {
    if (bw_arrow_primitive_width(f) > 0)
        return LAYOUT_FIXED;
    if (!strcmp(f, "n"))
        return LAYOUT_NULL;
    if (!strcmp(f, "b"))
        return LAYOUT_BOOL;
    if (!strcmp(f, "u") || !strcmp(f, "z"))
        return LAYOUT_BINARY;
    if (!strcmp(f, "U") || !strcmp(f, "Z"))
        return LAYOUT_LARGE_BINARY;
    if (!strcmp(f, "+l"))
        return LAYOUT_LIST;
    if (!strcmp(f, "+L"))
        return LAYOUT_LARGE_LIST;
    if (!strcmp(f, "+s"))
        return LAYOUT_STRUCT;
    if ((*list_size = bw_arrow_fixed_list_size(f)) >= 0)
        return LAYOUT_FIXED_LIST;
    if (f[0] == 't' && f[1] == 's' && f[2] != '\0' && strchr("smun", f[2]) != NULL && f[3] == ':')
        return LAYOUT_FIXED; /* timestamps: int64 */
    if (!strcmp(f, "tdD") || !strcmp(f, "tdm") || !strcmp(f, "w:16"))
        return LAYOUT_FIXED; /* date32, date64, 16-byte fixed binary (uuids) */
    return LAYOUT_OTHER;
}

typedef struct {
    char *err;
    size_t err_size;
    int root_is_batch;     /* the root is a struct: its children are the columns */
    int root_named;        /* a non-struct root with a name: it is the column */
    const char *path[BW_ARROW_MAX_DEPTH + 2];
    int depth;             /* names in path */
} check_ctx;

/* Writes "<where>: <message>" into c->err; returns -1. */
static int invalid(check_ctx *c, const char *fmt, ...) {
    size_t used = 0;
    int n;
    if (c->depth == 0)
        n = snprintf(c->err, c->err_size, "Arrow %s", c->root_is_batch ? "record batch" : "array");
    else
        n = snprintf(c->err, c->err_size, "%s",
                     c->root_is_batch || c->root_named ? "column " : "Arrow array > ");
    /* a deep path keeps its first and last names: the column, and where it went wrong */
    for (int i = 0; n >= 0 && (size_t)n < c->err_size - used && i < c->depth; i++) {
        used += (size_t)n;
        if (c->depth > 8 && i >= 3 && i < c->depth - 3) {
            n = i == 3 ? snprintf(c->err + used, c->err_size - used, " > ...") : 0;
            continue;
        }
        n = snprintf(c->err + used, c->err_size - used, "%s'%.60s'", i ? " > " : "", c->path[i]);
    }
    if (n >= 0 && (size_t)n < c->err_size - used) {
        used += (size_t)n;
        n = snprintf(c->err + used, c->err_size - used, ": ");
    }
    if (n >= 0 && (size_t)n < c->err_size - used) {
        used += (size_t)n;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + used, c->err_size - used, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Offsets [offset, offset + length] of a string or list array: non-negative, never
   decreasing; *last gets the final one. */
static int check_offsets(check_ctx *c, const void *buffer, int large, int64_t offset,
                         int64_t length, int64_t *last) {
    const int32_t *o32 = (const int32_t *)buffer + (large ? 0 : offset);
    const int64_t *o64 = (const int64_t *)buffer + (large ? offset : 0);
    int64_t prev = large ? o64[0] : o32[0];
    if (prev < 0)
        return invalid(c, "offset %lld of row 0 is negative", (long long)prev);
    for (int64_t i = 1; i <= length; i++) {
        int64_t next = large ? o64[i] : o32[i];
        if (next < prev)
            return invalid(c, "offsets decrease at row %lld (%lld, then %lld)", (long long)(i - 1),
                           (long long)prev, (long long)next);
        prev = next;
    }
    *last = prev;
    return 0;
}

static int check_node(check_ctx *c, const struct ArrowSchema *s, const struct ArrowArray *a);

static int check_child(check_ctx *c, const struct ArrowSchema *s, const struct ArrowArray *a,
                       const char *name) {
    c->path[c->depth++] = name != NULL ? name : "";
    int rc = check_node(c, s, a);
    c->depth--;
    return rc;
}

static int check_node(check_ctx *c, const struct ArrowSchema *s, const struct ArrowArray *a) {
    if (c->depth > BW_ARROW_MAX_DEPTH)
        return invalid(c, "nested more than %d levels deep", BW_ARROW_MAX_DEPTH);
    if (s->format == NULL)
        return invalid(c, "the schema has no format string");
    if (s->release == NULL || a->release == NULL)
        return invalid(c, "the %s was already released (its release callback is NULL)",
                       s->release == NULL ? "schema" : "array");
    const char *f = s->format;
    if (a->length < 0 || a->offset < 0 || a->length > INT64_MAX - a->offset)
        return invalid(c, "length %lld and offset %lld are out of range (format '%.40s')",
                       (long long)a->length, (long long)a->offset, f);
    if (a->null_count < -1 || a->null_count > a->length)
        return invalid(c, "null_count %lld is out of range for length %lld",
                       (long long)a->null_count, (long long)a->length);
    if (s->n_children < 0 || s->n_children != a->n_children)
        return invalid(c, "the schema has %lld children, the array %lld (format '%.40s')",
                       (long long)s->n_children, (long long)a->n_children, f);
    if (a->n_children > 0 && (s->children == NULL || a->children == NULL))
        return invalid(c, "the children pointer is NULL (format '%.40s')", f);
    for (int64_t i = 0; i < a->n_children; i++)
        if (s->children[i] == NULL || a->children[i] == NULL)
            return invalid(c, "child %lld is NULL (format '%.40s')", (long long)i, f);
    if (a->n_buffers < 0 || (a->n_buffers > 0 && a->buffers == NULL))
        return invalid(c, "the buffers pointer is NULL (format '%.40s')", f);
    if ((s->dictionary == NULL) != (a->dictionary == NULL))
        return invalid(c, "the %s has a dictionary, the %s none",
                       s->dictionary ? "schema" : "array", s->dictionary ? "array" : "schema");
    for (int64_t i = 0; i < a->n_children; i++)
        if (check_child(c, s->children[i], a->children[i], s->children[i]->name) < 0)
            return -1;
    if (s->dictionary != NULL && check_child(c, s->dictionary, a->dictionary, "dictionary") < 0)
        return -1;

    int64_t list_size = -1;
    layout k = layout_of(f, &list_size);
    if (s->dictionary != NULL && k != LAYOUT_FIXED)
        return invalid(c, "dictionary indices of format '%.40s' are not integers", f);
    static const struct { int buffers, children; } need[] = {
        [LAYOUT_OTHER] = {-1, -1},       [LAYOUT_NULL] = {0, 0},
        [LAYOUT_BOOL] = {2, 0},          [LAYOUT_FIXED] = {2, 0},
        [LAYOUT_BINARY] = {3, 0},        [LAYOUT_LARGE_BINARY] = {3, 0},
        [LAYOUT_LIST] = {2, 1},          [LAYOUT_LARGE_LIST] = {2, 1},
        [LAYOUT_FIXED_LIST] = {1, 1},    [LAYOUT_STRUCT] = {1, -1},
    };
    if (k == LAYOUT_OTHER)
        return 0;
    if (a->n_buffers != need[k].buffers)
        return invalid(c, "format '%.40s' needs %d buffers, the array has %lld", f,
                       need[k].buffers, (long long)a->n_buffers);
    if (need[k].children >= 0 && a->n_children != need[k].children)
        return invalid(c, "format '%.40s' needs %d children, the array has %lld", f,
                       need[k].children, (long long)a->n_children);
    if (k != LAYOUT_NULL && a->null_count != 0 && a->null_count != -1 && a->buffers[0] == NULL)
        return invalid(c, "null_count is %lld but there is no validity bitmap",
                       (long long)a->null_count);
    int64_t end = a->offset + a->length, last = 0;
    /* offset + length elements (+1 offset) of up to 8 bytes each must fit in memory: larger
       claims cannot be true, and the readers' index arithmetic must not overflow */
    if (k != LAYOUT_NULL && end > INT64_MAX / 8 - 1)
        return invalid(c, "offset %lld + length %lld is more than memory can hold (format "
                       "'%.40s')", (long long)a->offset, (long long)a->length, f);
    switch (k) {
    case LAYOUT_BOOL:
    case LAYOUT_FIXED:
        if (a->length > 0 && a->buffers[1] == NULL)
            return invalid(c, "no values buffer (format '%.40s')", f);
        return 0;
    case LAYOUT_BINARY:
    case LAYOUT_LARGE_BINARY:
        if (a->length == 0)
            return 0;
        if (a->buffers[1] == NULL)
            return invalid(c, "no offsets buffer (format '%.40s')", f);
        if (check_offsets(c, a->buffers[1], k == LAYOUT_LARGE_BINARY, a->offset, a->length,
                          &last) < 0)
            return -1;
        if (a->buffers[2] == NULL && last != 0)
            return invalid(c, "no data buffer, but the offsets reach %lld", (long long)last);
        return 0;
    case LAYOUT_LIST:
    case LAYOUT_LARGE_LIST:
        if (a->length == 0)
            return 0;
        if (a->buffers[1] == NULL)
            return invalid(c, "no offsets buffer (format '%.40s')", f);
        if (check_offsets(c, a->buffers[1], k == LAYOUT_LARGE_LIST, a->offset, a->length,
                          &last) < 0)
            return -1;
        if (last > a->children[0]->length)
            return invalid(c, "list offsets reach %lld, past the %lld values of the child",
                           (long long)last, (long long)a->children[0]->length);
        return 0;
    case LAYOUT_FIXED_LIST:
        if (list_size > 0 && end > a->children[0]->length / list_size)
            return invalid(c, "%lld rows of %lld values need more than the %lld values of the "
                           "child", (long long)end, (long long)list_size,
                           (long long)a->children[0]->length);
        return 0;
    case LAYOUT_STRUCT:
        for (int64_t i = 0; i < a->n_children; i++)
            if (a->children[i]->length < end)
                return invalid(c, "child '%.60s' has %lld rows, fewer than the %lld the struct "
                               "spans", s->children[i]->name ? s->children[i]->name : "",
                               (long long)a->children[i]->length, (long long)end);
        return 0;
    default:
        return 0;
    }
}

int bw_arrow_validate(const struct ArrowSchema *schema, const struct ArrowArray *array,
                      char *err, size_t err_size) {
    check_ctx c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.err_size = err_size;
    c.root_is_batch = schema->format != NULL && strcmp(schema->format, "+s") == 0;
    if (!c.root_is_batch && schema->name != NULL && schema->name[0] != '\0') {
        c.root_named = 1;
        c.path[c.depth++] = schema->name;
    }
    return check_node(&c, schema, array);
}
