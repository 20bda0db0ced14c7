/* libFuzzer target: Arrow C Data Interface validation. The input describes a tree of
   schema/array structs (formats, lengths, offsets, null counts, buffer and child counts,
   offsets' values, dictionaries, schema/array disagreements); every buffer is a heap block of
   exactly the size its array declares (from offset + length, and for string data up to the
   last offset), so reading past one is a sanitizer report. bw_arrow_validate must refuse the
   tree or accept it; once accepted, a consumer walk reads every byte the rules promise (each
   validity bit, value, offset, string byte, and the child ranges lists point into) and checks
   those promises hold.
   sources: arrow_c.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arrow_c.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

enum { MAX_NODES = 24, MAX_CHILDREN = 3, MAX_DEPTH = 4, MAX_BUFFERS = 4 };

typedef struct {
    const uint8_t *p;
    size_t left;
} input;

static unsigned take(input *in) {
    if (in->left == 0)
        return 0;
    in->left--;
    return *in->p++;
}

typedef struct {
    struct ArrowSchema schema;
    struct ArrowArray array;
    const void *buffers[MAX_BUFFERS];
    struct ArrowSchema *schema_children[MAX_CHILDREN];
    struct ArrowArray *array_children[MAX_CHILDREN];
} node;

static node nodes[MAX_NODES];
static int n_nodes;
static void *blocks[MAX_NODES * MAX_BUFFERS];
static int n_blocks;

static void release_schema(struct ArrowSchema *s) { s->release = NULL; }
static void release_array(struct ArrowArray *a) { a->release = NULL; }

static const char *const formats[] = {
    "n", "b", "c", "C", "s", "i", "l", "L", "e", "f", "g", "u", "z", "U", "Z", "+l", "+L",
    "+w:0", "+w:1", "+w:3", "+s", "tsu:", "tsn:UTC", "tdD", "+m", "d:10,2", "+w:", "",
};

/* A heap block of exactly n bytes, filled from the input. */
static void *block(input *in, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    REQUIRE(b != NULL);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)take(in);
    blocks[n_blocks++] = b;
    return b;
}

/* offset + length, the rows every buffer is sized by; -1 when too large to allocate. */
static int64_t rows_of(const struct ArrowArray *a) {
    if (a->offset < 0 || a->length < 0 || a->offset > 64 || a->length > 64)
        return -1;
    return a->offset + a->length;
}

static node *build(input *in, int depth) {
    node *n = &nodes[n_nodes++];
    memset(n, 0, sizeof *n);
    unsigned pick = take(in);
    const char *f = formats[pick % (sizeof formats / sizeof formats[0])];
    n->schema.format = (pick & 0x80) && take(in) == 0xff ? NULL : f;
    n->schema.name = "col";
    n->schema.release = take(in) == 0xfe ? NULL : release_schema;
    n->array.release = take(in) == 0xfe ? NULL : release_array;
    n->schema.children = n->schema_children;
    n->array.children = n->array_children;
    n->array.buffers = n->buffers;
    /* mostly small lengths and offsets; now and then a negative or an enormous one */
    unsigned shape = take(in);
    n->array.length = (int64_t)(shape % 16) - 1;
    n->array.offset = (int64_t)((shape >> 4) % 4) - (shape == 0xff);
    unsigned huge = take(in);
    if (huge == 0xf0)
        n->array.length = INT64_MAX - (int64_t)take(in);
    if (huge == 0xf1)
        n->array.offset = INT64_MAX - (int64_t)take(in);
    if (huge == 0xf2)
        n->array.length = INT64_MAX / 8 - (int64_t)take(in);
    n->array.null_count = (int64_t)(take(in) % 20) - 1;

    int wants_children = f[0] == '+' ? (f[1] == 's' ? 1 + (int)(take(in) % MAX_CHILDREN) : 1) : 0;
    unsigned count_noise = take(in);
    int children = count_noise == 0xee ? (int)(take(in) % (MAX_CHILDREN + 1)) : wants_children;
    if (depth >= MAX_DEPTH)
        children = 0;
    for (int i = 0; i < children; i++) {
        if (n_nodes >= MAX_NODES) { /* out of nodes: fewer children */
            children = i;
            break;
        }
        node *c = build(in, depth + 1);
        n->schema_children[i] = &c->schema;
        n->array_children[i] = &c->array;
    }
    n->array.n_children = children;
    n->schema.n_children = count_noise == 0xed ? children + 1 : children;
    if (count_noise == 0xec && children > 0)
        n->array_children[take(in) % (unsigned)children] = NULL;
    if (count_noise == 0xeb && n_nodes < MAX_NODES) { /* a dictionary on one side or both */
        node *d = build(in, MAX_DEPTH);
        unsigned sides = take(in) % 3;
        n->schema.dictionary = sides != 1 ? &d->schema : NULL;
        n->array.dictionary = sides != 2 ? &d->array : NULL;
    }

    /* buffers: as many as the format needs, sized by its rules, unless the input says no */
    int fixed_width = bw_arrow_primitive_width(f);
    int is_bool = !strcmp(f, "b"), is_ts = !strncmp(f, "ts", 2);
    int is_binary = !strcmp(f, "u") || !strcmp(f, "z"), is_large_binary = !strcmp(f, "U") || !strcmp(f, "Z");
    int is_list = !strcmp(f, "+l"), is_large_list = !strcmp(f, "+L");
    int need = !strcmp(f, "n") ? 0 : (fixed_width || is_bool || is_ts || is_list || is_large_list) ? 2
               : (is_binary || is_large_binary) ? 3 : 1;
    unsigned buffer_noise = take(in);
    int64_t nbuf = buffer_noise < 0xf0 ? need : (int64_t)(buffer_noise % 5) - (buffer_noise == 0xff);
    n->array.n_buffers = nbuf;
    int64_t rows = rows_of(&n->array);
    int64_t last_offset = 0;
    for (int64_t i = 0; i < nbuf && i < MAX_BUFFERS; i++) {
        if (take(in) == 0xfd || rows < 0) {
            n->buffers[i] = NULL;
            continue;
        }
        size_t bytes;
        if (i == 0) {
            bytes = (size_t)(rows + 7) / 8;
        } else if (i == 1 && (fixed_width || is_ts)) {
            bytes = (size_t)rows * (size_t)(fixed_width ? fixed_width : 8);
        } else if (i == 1 && is_bool) {
            bytes = (size_t)(rows + 7) / 8;
        } else if (i == 1 && (is_binary || is_large_binary || is_list || is_large_list)) {
            int wide = is_large_binary || is_large_list;
            bytes = (size_t)(rows + 1) * (wide ? 8 : 4);
            uint8_t *b = malloc(bytes);
            REQUIRE(b != NULL);
            blocks[n_blocks++] = b;
            /* small offsets that mostly rise, from the input: some fall, some are negative */
            int64_t at = (int64_t)(take(in) % 4) - 1;
            for (int64_t k = 0; k <= rows; k++) {
                unsigned step = take(in);
                at += step == 0xff ? -3 : (int64_t)(step % 4);
                if (wide)
                    memcpy(b + 8 * k, &at, 8);
                else {
                    int32_t at32 = (int32_t)at;
                    memcpy(b + 4 * k, &at32, 4);
                }
            }
            last_offset = at;
            n->buffers[i] = b;
            continue;
        } else if (i == 2 && (is_binary || is_large_binary)) {
            bytes = last_offset > 0 ? (size_t)last_offset : 0;
        } else {
            bytes = 8;
        }
        n->buffers[i] = block(in, bytes);
    }
    return n;
}

static volatile uint64_t sink;

static int64_t offset_at(const void *buffer, int wide, int64_t i) {
    if (wide)
        return ((const int64_t *)buffer)[i];
    return ((const int32_t *)buffer)[i];
}

/* Reads what an accepted node promises and checks the promises. */
static void consume(const struct ArrowSchema *s, const struct ArrowArray *a, int depth) {
    REQUIRE(depth <= BW_ARROW_MAX_DEPTH + 1);
    const char *f = s->format;
    for (int64_t i = 0; i < a->n_children; i++)
        consume(s->children[i], a->children[i], depth + 1);
    if (s->dictionary != NULL)
        consume(s->dictionary, a->dictionary, depth + 1);
    int width = bw_arrow_primitive_width(f);
    int is_ts = !strncmp(f, "ts", 2) && f[2] && strchr("smun", f[2]) && f[3] == ':';
    int is_bool = !strcmp(f, "b");
    int binary = !strcmp(f, "u") || !strcmp(f, "z"), large_binary = !strcmp(f, "U") || !strcmp(f, "Z");
    int list = !strcmp(f, "+l"), large_list = !strcmp(f, "+L");
    int64_t list_size = bw_arrow_fixed_list_size(f);
    int known = width || is_ts || is_bool || binary || large_binary || list || large_list ||
                list_size >= 0 || !strcmp(f, "+s") || !strcmp(f, "n");
    if (!known || !strcmp(f, "n"))
        return; /* checked for the generic rules only: nothing is read */
    int64_t end = a->offset + a->length;
    uint64_t acc = 0;
    if (a->null_count != 0 && a->length > 0) {
        const uint8_t *validity = a->buffers[0];
        REQUIRE(validity != NULL || a->null_count == -1);
        for (int64_t i = a->offset; validity && i < end; i++)
            acc += bw_arrow_bit(validity, i);
    }
    if ((width || is_ts) && a->length > 0) {
        int w = width ? width : 8;
        const uint8_t *values = a->buffers[1];
        for (int64_t i = a->offset * w; i < end * w; i++)
            acc += values[i];
    }
    if (is_bool && a->length > 0)
        for (int64_t i = a->offset; i < end; i++)
            acc += bw_arrow_bit(a->buffers[1], i);
    if ((binary || large_binary || list || large_list) && a->length > 0) {
        int wide = large_binary || large_list;
        int64_t first = offset_at(a->buffers[1], wide, a->offset);
        int64_t last = offset_at(a->buffers[1], wide, end);
        REQUIRE(first >= 0 && first <= last);
        for (int64_t i = a->offset; i < end; i++)
            REQUIRE(offset_at(a->buffers[1], wide, i) <= offset_at(a->buffers[1], wide, i + 1));
        if ((binary || large_binary) && last > 0) {
            const uint8_t *data = a->buffers[2];
            REQUIRE(data != NULL);
            for (int64_t i = first; i < last; i++)
                acc += data[i];
        }
        if (list || large_list)
            REQUIRE(last <= a->children[0]->length);
    }
    if (list_size >= 0)
        REQUIRE(list_size == 0 || end <= a->children[0]->length / list_size);
    if (!strcmp(f, "+s"))
        for (int64_t i = 0; i < a->n_children; i++)
            REQUIRE(a->children[i]->length >= end);
    sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input in = {data, size};
    n_nodes = 0;
    n_blocks = 0;
    node *root = build(&in, 0);
    char err[128];
    size_t err_size = 1 + take(&in) % sizeof err;
    memset(err, 'x', sizeof err);
    int rc = bw_arrow_validate(&root->schema, &root->array, err, err_size);
    if (rc == 0)
        consume(&root->schema, &root->array, 0);
    else
        REQUIRE(rc == -1 && memchr(err, '\0', err_size) != NULL &&
                (err_size == sizeof err || err[err_size] == 'x'));
    for (int i = 0; i < n_blocks; i++)
        free(blocks[i]);
    return 0;
}
