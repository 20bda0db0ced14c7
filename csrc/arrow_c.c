#include "arrow_c.h"

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

int bw_arrow_vectors_view(const struct ArrowSchema *schema, const struct ArrowArray *array,
                          bw_arrow_vectors *v, char *err, size_t err_size) {
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
        snprintf(err, err_size, "expected an Arrow fixed_size_list, list or large_list of "
                 "float32/float64, got Arrow format '%.40s'", fmt);
        return -1;
    }
    if (schema->n_children != 1 || array->n_children != 1 || schema->children == NULL ||
        array->children == NULL || schema->children[0] == NULL || array->children[0] == NULL) {
        snprintf(err, err_size, "malformed Arrow list array (format '%.40s'): expected one child",
                 fmt);
        return -1;
    }
    const struct ArrowSchema *child_schema = schema->children[0];
    const struct ArrowArray *child = array->children[0];
    const char *cfmt = child_schema->format ? child_schema->format : "";
    if (strcmp(cfmt, "f") != 0 && strcmp(cfmt, "g") != 0) {
        snprintf(err, err_size, "expected Arrow list values of float32 ('f') or float64 ('g'), "
                 "got Arrow format '%.40s'", cfmt);
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
        snprintf(err, err_size, "malformed Arrow array (format '%.40s')", fmt);
        return -1;
    }
    v->value_format = cfmt[0];
    v->value_width = cfmt[0] == 'f' ? 4 : 8;
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
                           int *why, int64_t *bad_len) {
    for (int64_t r = 0; r < v->length; r++) {
        int64_t first, count;
        if (bw_arrow_vectors_row(v, r, &first, &count)) {
            *bad_row = r;
            *why = 1;
            return -1;
        }
        if (dimension >= 0 && count != dimension) {
            *bad_row = r;
            *why = 2;
            *bad_len = count;
            return -1;
        }
        if (first < 0 || count < 0 || first > v->values_length - count) {
            *bad_row = r;
            *why = 4;
            return -1;
        }
        if (bw_arrow_vectors_has_null_value(v, first, count)) {
            *bad_row = r;
            *why = 3;
            return -1;
        }
    }
    return 0;
}
