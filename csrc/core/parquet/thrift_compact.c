/* Thrift compact protocol reader: see thrift_compact.h. */
#include "thrift_compact.h"

void bw_thrift_init(bw_thrift *t, const uint8_t *data, size_t size) {
    t->pos = data;
    t->end = data + size;
    t->depth = 0;
    t->error = NULL;
    t->ran_out = 0;
}

static int fail(bw_thrift *t, const char *why) {
    if (t->error == NULL)
        t->error = why;
    return -1;
}

/* A failure because the data ends before what it says is there. */
static int ran_out(bw_thrift *t, const char *why) {
    if (t->error == NULL)
        t->ran_out = 1;
    return fail(t, why);
}

static int read_varint(bw_thrift *t, uint64_t *value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (t->pos >= t->end)
            return ran_out(t, "metadata ends inside a varint");
        uint8_t b = *t->pos++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *value = v;
            return 0;
        }
    }
    return fail(t, "varint longer than 10 bytes");
}

static int64_t unzigzag(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

int bw_thrift_struct_begin(bw_thrift *t) {
    if (t->error)
        return -1;
    if (t->depth >= BW_THRIFT_MAX_DEPTH)
        return fail(t, "metadata nested too deeply");
    t->depth++;
    return 0;
}

int bw_thrift_struct_end(bw_thrift *t) {
    if (t->error)
        return -1;
    t->depth--;
    return 0;
}

int bw_thrift_field(bw_thrift *t, int16_t *last_id, int *type, int16_t *id) {
    if (t->error)
        return -1;
    if (t->pos >= t->end)
        return ran_out(t, "metadata ends inside a struct");
    uint8_t header = *t->pos++;
    *type = header & 0x0f;
    if (*type == BW_THRIFT_STOP) {
        *id = 0;
        return 0;
    }
    if (*type > BW_THRIFT_STRUCT)
        return fail(t, "unknown field type in metadata");
    int delta = header >> 4;
    if (delta) {
        int next = *last_id + delta;
        if (next > INT16_MAX)
            return fail(t, "field id out of range in metadata");
        *id = (int16_t)next;
    } else {
        uint64_t raw;
        if (read_varint(t, &raw) < 0)
            return -1;
        int64_t v = unzigzag(raw);
        if (v < INT16_MIN || v > INT16_MAX)
            return fail(t, "field id out of range in metadata");
        *id = (int16_t)v;
    }
    *last_id = *id;
    return 0;
}

static int read_integer(bw_thrift *t, int type, int want, int64_t *value) {
    if (t->error)
        return -1;
    if (type != want)
        return fail(t, "integer field of another type in metadata");
    uint64_t raw;
    if (read_varint(t, &raw) < 0)
        return -1;
    *value = unzigzag(raw);
    return 0;
}

int bw_thrift_i64(bw_thrift *t, int type, int64_t *value) {
    return read_integer(t, type, BW_THRIFT_I64, value);
}

int bw_thrift_i32(bw_thrift *t, int type, int32_t *value) {
    int64_t v;
    if (read_integer(t, type, BW_THRIFT_I32, &v) < 0)
        return -1;
    if (v < INT32_MIN || v > INT32_MAX)
        return fail(t, "i32 field out of range in metadata");
    *value = (int32_t)v;
    return 0;
}

int bw_thrift_list(bw_thrift *t, int *elem_type, uint32_t *count) {
    if (t->error)
        return -1;
    if (t->pos >= t->end)
        return ran_out(t, "metadata ends inside a list header");
    uint8_t header = *t->pos++;
    *elem_type = header & 0x0f;
    uint64_t n = header >> 4;
    if (n == 15 && read_varint(t, &n) < 0)
        return -1;
    if (*elem_type == BW_THRIFT_STOP || *elem_type > BW_THRIFT_STRUCT)
        return fail(t, "unknown list element type in metadata");
    /* every element takes at least one byte, so a count above what is left is a lie */
    if (n > (uint64_t)(t->end - t->pos))
        return ran_out(t, "list longer than the metadata holding it");
    *count = (uint32_t)n;
    return 0;
}

static int skip_bytes(bw_thrift *t, uint64_t n) {
    if (n > (uint64_t)(t->end - t->pos))
        return ran_out(t, "metadata ends inside a value");
    t->pos += n;
    return 0;
}

int bw_thrift_skip(bw_thrift *t, int type) {
    if (t->error)
        return -1;
    uint64_t raw;
    switch (type) {
    case BW_THRIFT_TRUE:
    case BW_THRIFT_FALSE:
        return 0; /* a struct field's bool lives in its header */
    case BW_THRIFT_BYTE:
        return skip_bytes(t, 1);
    case BW_THRIFT_I16:
    case BW_THRIFT_I32:
    case BW_THRIFT_I64:
        return read_varint(t, &raw);
    case BW_THRIFT_DOUBLE:
        return skip_bytes(t, 8);
    case BW_THRIFT_BINARY:
        if (read_varint(t, &raw) < 0)
            return -1;
        return skip_bytes(t, raw);
    case BW_THRIFT_LIST:
    case BW_THRIFT_SET: {
        int elem;
        uint32_t n;
        if (bw_thrift_list(t, &elem, &n) < 0 || bw_thrift_struct_begin(t) < 0)
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            /* a bool element is one byte, unlike a bool field */
            if ((elem == BW_THRIFT_TRUE || elem == BW_THRIFT_FALSE) ? skip_bytes(t, 1) < 0
                                                                    : bw_thrift_skip(t, elem) < 0)
                return -1;
        }
        return bw_thrift_struct_end(t);
    }
    case BW_THRIFT_MAP: {
        if (read_varint(t, &raw) < 0)
            return -1;
        if (raw == 0)
            return 0;
        if (raw > (uint64_t)(t->end - t->pos))
            return ran_out(t, "map longer than the metadata holding it");
        if (t->pos >= t->end)
            return ran_out(t, "metadata ends inside a map header");
        uint8_t kinds = *t->pos++;
        int key = kinds >> 4, value = kinds & 0x0f;
        if (key == BW_THRIFT_STOP || key > BW_THRIFT_STRUCT || value == BW_THRIFT_STOP ||
            value > BW_THRIFT_STRUCT)
            return fail(t, "unknown map types in metadata");
        if (bw_thrift_struct_begin(t) < 0)
            return -1;
        for (uint64_t i = 0; i < raw; i++) {
            int kb = key == BW_THRIFT_TRUE || key == BW_THRIFT_FALSE;
            int vb = value == BW_THRIFT_TRUE || value == BW_THRIFT_FALSE;
            if ((kb ? skip_bytes(t, 1) : bw_thrift_skip(t, key)) < 0 ||
                (vb ? skip_bytes(t, 1) : bw_thrift_skip(t, value)) < 0)
                return -1;
        }
        return bw_thrift_struct_end(t);
    }
    case BW_THRIFT_STRUCT: {
        static const bw_thrift_struct no_fields = {NULL, 0}; /* every field skipped */
        return bw_thrift_read_struct(t, &no_fields, NULL, NULL);
    }
    default:
        return fail(t, "unknown value type in metadata");
    }
}

/* ---- a struct read by its table -------------------------------------------------------- */

static const bw_thrift_field_spec *field_spec(const bw_thrift_struct *table, int16_t id) {
    for (size_t i = 0; i < table->count; i++)
        if (table->fields[i].id == id)
            return &table->fields[i];
    return NULL;
}

/* One field's value, `type` its wire type, as its spec says. */
static int read_field_value(bw_thrift *t, const bw_thrift_field_spec *spec, int type,
                            void *target, void *context) {
    switch (spec->type) {
    case BW_THRIFT_I32:
        return bw_thrift_i32(t, type, (int32_t *)(void *)((char *)target + spec->offset));
    case BW_THRIFT_I64:
        return bw_thrift_i64(t, type, (int64_t *)(void *)((char *)target + spec->offset));
    case BW_THRIFT_TRUE:
        if (type != BW_THRIFT_TRUE && type != BW_THRIFT_FALSE)
            break;
        /* a struct field's bool is its header's type */
        *(int32_t *)(void *)((char *)target + spec->offset) = type == BW_THRIFT_TRUE;
        return 0;
    case BW_THRIFT_STRUCT:
    case BW_THRIFT_LIST:
        if (type != spec->type)
            break;
        if (spec->handler != NULL)
            return spec->handler(t, target, context);
        if (spec->type == BW_THRIFT_STRUCT && spec->nested != NULL)
            return bw_thrift_read_struct(t, spec->nested, (char *)target + spec->offset,
                                         context);
        break;
    default:
        break;
    }
    return bw_thrift_skip(t, type);
}

int bw_thrift_read_struct(bw_thrift *t, const bw_thrift_struct *table, void *target,
                          void *context) {
    if (bw_thrift_struct_begin(t) < 0)
        return -1;
    int16_t last = 0, id;
    int type;
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return -1;
        if (type == BW_THRIFT_STOP)
            break;
        const bw_thrift_field_spec *spec = field_spec(table, id);
        int rc = spec != NULL ? read_field_value(t, spec, type, target, context)
                              : bw_thrift_skip(t, type);
        if (rc != 0)
            return rc;
    }
    return bw_thrift_struct_end(t);
}
