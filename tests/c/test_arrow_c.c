/* Arrow C Data Interface validation and the vector view, over structs built by hand: what
   is well formed is accepted, every broken rule is refused with a message naming the column.
   sources: arrow_c.c */
#include <stdint.h>
#include <stdlib.h>

#include "arrow_c.h"
#include "check.h"

static void release_schema(struct ArrowSchema *s) { s->release = NULL; }
static void release_array(struct ArrowArray *a) { a->release = NULL; }

/* One node: a schema and an array with up to 4 buffers and 4 children, all in place. */
typedef struct {
    struct ArrowSchema schema;
    struct ArrowArray array;
    const void *buffers[4];
    struct ArrowSchema *schema_children[4];
    struct ArrowArray *array_children[4];
} node;

static void make_node(node *n, const char *format, const char *name, int64_t length,
                      int64_t n_buffers) {
    memset(n, 0, sizeof *n);
    n->schema.format = format;
    n->schema.name = name;
    n->schema.release = release_schema;
    n->schema.children = n->schema_children;
    n->array.length = length;
    n->array.n_buffers = n_buffers;
    n->array.buffers = n->buffers;
    n->array.children = n->array_children;
    n->array.release = release_array;
}

static void add_child(node *parent, node *child) {
    int64_t i = parent->array.n_children++;
    parent->schema.n_children++;
    parent->schema_children[i] = &child->schema;
    parent->array_children[i] = &child->array;
}

static int validate(node *n, char *err, size_t err_size) {
    err[0] = '\0';
    return bw_arrow_validate(&n->schema, &n->array, err, err_size);
}

static const int64_t ids[4] = {1, 2, 3, 4};
static const float values[12] = {0};
static const int32_t offsets_ok[5] = {0, 3, 6, 9, 12};

TEST(a_well_formed_batch_is_accepted) {
    node batch, id, emb, item, name;
    make_node(&batch, "+s", "", 4, 1);
    make_node(&id, "l", "id", 4, 2);
    id.buffers[1] = ids;
    make_node(&emb, "+w:3", "emb", 4, 1);
    make_node(&item, "f", "item", 12, 2);
    item.buffers[1] = values;
    add_child(&emb, &item);
    static const int32_t name_offsets[5] = {0, 1, 1, 3, 3};
    make_node(&name, "u", "name", 4, 3);
    name.buffers[1] = name_offsets;
    name.buffers[2] = "abc";
    add_child(&batch, &id);
    add_child(&batch, &emb);
    add_child(&batch, &name);
    char err[200];
    CHECK_EQ(validate(&batch, err, sizeof err), 0);
    CHECK_BYTES(err, strlen(err), "");
}

TEST(too_few_fixed_list_values_name_the_column) {
    node batch, emb, item;
    make_node(&batch, "+s", "", 4, 1);
    make_node(&emb, "+w:3", "emb", 4, 1);
    make_node(&item, "f", "item", 11, 2); /* 4 rows of 3 need 12 */
    item.buffers[1] = values;
    add_child(&emb, &item);
    add_child(&batch, &emb);
    char err[200];
    CHECK_EQ(validate(&batch, err, sizeof err), -1);
    CHECK(strstr(err, "column 'emb'") == err);
    CHECK(strstr(err, "need more than the 11 values") != NULL);
}

TEST(list_offsets_are_checked) {
    node list, item;
    make_node(&list, "+l", "vec", 4, 2);
    make_node(&item, "f", "item", 12, 2);
    item.buffers[1] = values;
    add_child(&list, &item);
    list.buffers[1] = offsets_ok;
    char err[200];
    CHECK_EQ(validate(&list, err, sizeof err), 0);
    static const int32_t decreasing[5] = {0, 3, 2, 9, 12};
    list.buffers[1] = decreasing;
    CHECK_EQ(validate(&list, err, sizeof err), -1);
    CHECK(strstr(err, "'vec'") != NULL && strstr(err, "decrease at row 1") != NULL);
    static const int32_t negative[5] = {-1, 3, 6, 9, 12};
    list.buffers[1] = negative;
    CHECK_EQ(validate(&list, err, sizeof err), -1);
    static const int32_t past_child[5] = {0, 3, 6, 9, 13};
    list.buffers[1] = past_child;
    CHECK_EQ(validate(&list, err, sizeof err), -1);
    CHECK(strstr(err, "past the 12 values") != NULL);
    list.buffers[1] = NULL;
    CHECK_EQ(validate(&list, err, sizeof err), -1);
    /* a slice past the decrease: rows 2..3 read offsets 2..4 only */
    list.buffers[1] = decreasing;
    list.array.offset = 2;
    list.array.length = 2;
    CHECK_EQ(validate(&list, err, sizeof err), 0);
}

TEST(generic_rules_are_checked) {
    node col;
    char err[200];
    make_node(&col, "l", "id", 4, 2);
    col.buffers[1] = ids;
    CHECK_EQ(validate(&col, err, sizeof err), 0);
    col.array.null_count = 1; /* nulls claimed, no bitmap */
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    CHECK(strstr(err, "no validity bitmap") != NULL);
    col.array.null_count = 5; /* more nulls than rows */
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    col.array.null_count = -1; /* unknown is allowed */
    CHECK_EQ(validate(&col, err, sizeof err), 0);
    col.array.length = -1;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    col.array.length = 4;
    col.array.offset = INT64_MAX - 2;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    col.array.offset = 0;
    col.array.n_buffers = 1;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    CHECK(strstr(err, "needs 2 buffers") != NULL);
    col.array.n_buffers = 2;
    col.buffers[1] = NULL;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    col.buffers[1] = ids;
    col.array.release = NULL;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
    CHECK(strstr(err, "already released") != NULL);
    col.array.release = release_array;
    col.schema.format = NULL;
    CHECK_EQ(validate(&col, err, sizeof err), -1);
}

TEST(schema_and_array_must_agree_on_children) {
    node batch, id;
    make_node(&batch, "+s", "", 4, 1);
    make_node(&id, "l", "id", 4, 2);
    id.buffers[1] = ids;
    add_child(&batch, &id);
    batch.schema.n_children = 0;
    char err[200];
    CHECK_EQ(validate(&batch, err, sizeof err), -1);
    batch.schema.n_children = 1;
    batch.array_children[0] = NULL;
    CHECK_EQ(validate(&batch, err, sizeof err), -1);
    batch.array_children[0] = &id.array;
    id.array.length = 3; /* fewer rows than the batch */
    CHECK_EQ(validate(&batch, err, sizeof err), -1);
    CHECK(strstr(err, "'id' has 3 rows") != NULL);
}

TEST(strings_without_data_are_empty_only) {
    node s;
    static const int32_t empty[3] = {0, 0, 0};
    static const int32_t one[3] = {0, 0, 1};
    make_node(&s, "u", "s", 2, 3);
    s.buffers[1] = empty;
    char err[200];
    CHECK_EQ(validate(&s, err, sizeof err), 0);
    s.buffers[1] = one;
    CHECK_EQ(validate(&s, err, sizeof err), -1);
    CHECK(strstr(err, "no data buffer") != NULL);
}

TEST(a_cycle_stops_at_the_depth_limit) {
    node loop;
    make_node(&loop, "+l", "deep", 0, 2);
    add_child(&loop, &loop); /* its own child */
    char err[300];
    CHECK_EQ(validate(&loop, err, sizeof err), -1);
    CHECK(strstr(err, "nested more than") != NULL);
    CHECK(strstr(err, " > ...") != NULL); /* the long path is shortened */
}

TEST(a_small_error_buffer_is_never_overrun) {
    node col;
    make_node(&col, "l", "a_rather_long_column_name", 4, 2);
    col.array.null_count = 1;
    char err[16];
    memset(err, 'x', sizeof err);
    CHECK_EQ(bw_arrow_validate(&col.schema, &col.array, err, 8), -1);
    CHECK(memchr(err, '\0', 8) != NULL);
    CHECK(err[8] == 'x');
}

TEST(format_helpers) {
    CHECK_EQ(bw_arrow_fixed_list_size("+w:3"), 3);
    CHECK_EQ(bw_arrow_fixed_list_size("+w:0"), 0);
    CHECK_EQ(bw_arrow_fixed_list_size("+w:"), -1);
    CHECK_EQ(bw_arrow_fixed_list_size("+w:3x"), -1);
    CHECK_EQ(bw_arrow_fixed_list_size("+w:99999999999999999999"), -1);
    CHECK_EQ(bw_arrow_fixed_list_size("+l"), -1);
    CHECK_EQ(bw_arrow_fixed_list_size(NULL), -1);
    CHECK_EQ(bw_arrow_primitive_width("f"), 4);
    CHECK_EQ(bw_arrow_primitive_width("g"), 8);
    CHECK_EQ(bw_arrow_primitive_width("e"), 2);
    CHECK_EQ(bw_arrow_primitive_width("c"), 1);
    CHECK_EQ(bw_arrow_primitive_width("ff"), 0);
    CHECK_EQ(bw_arrow_primitive_width(""), 0);
    CHECK_EQ(bw_arrow_primitive_width(NULL), 0);
}

TEST(vector_view_rows) {
    node list, item;
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    static const int32_t offsets[4] = {0, 2, 2, 6};
    make_node(&list, "+l", "vec", 3, 2);
    list.buffers[1] = offsets;
    make_node(&item, "f", "item", 6, 2);
    item.buffers[1] = v;
    add_child(&list, &item);
    char err[200];
    CHECK_EQ(validate(&list, err, sizeof err), 0);
    bw_arrow_vectors view;
    CHECK_EQ(bw_arrow_vectors_view(&list.schema, &list.array, &view, err, sizeof err), 0);
    CHECK_EQ(view.length, 3);
    CHECK_EQ(view.value_width, 4);
    int64_t first = -1, count = -1;
    CHECK_EQ(bw_arrow_vectors_row(&view, 2, &first, &count), 0);
    CHECK(first == 2 && count == 4);
    CHECK_EQ(bw_arrow_vectors_row(&view, 1, &first, &count), 0);
    CHECK(first == 2 && count == 0);
    CHECK_EQ(bw_arrow_vectors_row(&view, 0, &first, &count), 0);
    CHECK(first == 0 && count == 2);
    CHECK_EQ(bw_arrow_vectors_has_null_value(&view, 0, 6), 0);
    /* the view refuses a value type it does not read */
    item.schema.format = "i";
    CHECK_EQ(bw_arrow_vectors_view(&list.schema, &list.array, &view, err, sizeof err), -1);
    CHECK(strstr(err, "int32") != NULL); /* the type named in words, not its format code */
}

TEST(numeric_lists_view_reads_signed_integers_too) {
    node list, item;
    static const int16_t v[4] = {1, -2, 3, -4};
    make_node(&list, "+w:2", "vec", 2, 1);
    make_node(&item, "s", "item", 4, 2);
    item.buffers[1] = v;
    add_child(&list, &item);
    char err[200];
    CHECK_EQ(validate(&list, err, sizeof err), 0);
    bw_arrow_vectors view;
    CHECK_EQ(bw_arrow_numeric_lists_view(&list.schema, &list.array, &view, err, sizeof err), 0);
    CHECK_EQ(view.value_format, 's');
    CHECK_EQ(view.value_width, 2);
    int64_t first = -1, count = -1;
    CHECK_EQ(bw_arrow_vectors_row(&view, 1, &first, &count), 0);
    CHECK(first == 2 && count == 2);
    CHECK_EQ(((const int16_t *)(const void *)view.values)[first], 3);
    /* the float view of VectorCodec and encode_batch still refuses them */
    CHECK_EQ(bw_arrow_vectors_view(&list.schema, &list.array, &view, err, sizeof err), -1);
    /* unsigned integers, half floats and booleans are not numeric list values */
    static const char *const refused[] = {"S", "e", "b", "C"};
    for (int i = 0; i < 4; i++) {
        item.schema.format = refused[i];
        CHECK_EQ(bw_arrow_numeric_lists_view(&list.schema, &list.array, &view, err, sizeof err),
                 -1);
    }
}

RUN_TESTS(a_well_formed_batch_is_accepted, too_few_fixed_list_values_name_the_column,
          list_offsets_are_checked, generic_rules_are_checked,
          schema_and_array_must_agree_on_children, strings_without_data_are_empty_only,
          a_cycle_stops_at_the_depth_limit, a_small_error_buffer_is_never_overrun, format_helpers,
          vector_view_rows, numeric_lists_view_reads_signed_integers_too)
