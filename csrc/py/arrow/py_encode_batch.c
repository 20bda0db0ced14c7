/* Binding of encode_batch.c: bulkwire._core.encode_batch(batch, ...) -> list[bytes].

   The batch is any object with __arrow_c_array__ (a struct array: a record batch) or
   __arrow_c_stream__ (a stream of them: a table, a reader). pyarrow is never imported: the
   capsules of the Arrow PyCapsule interface are read through py_arrow.h, the import path
   VectorCodec uses too, which validates every batch before it is read. Every row of the batch is
   validated before the first byte is written, so a bad row raises before anything of its
   batch can be sent. The commands are written with the GIL released. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_pool.h"
#include "encode_batch.h"
#include "json_string.h"
#include "py_arrow.h"
#include "py_encode_batch.h"
#include "py_errors.h"
#include "py_float32_mode.h"
#include "py_state.h"

/* One record batch being encoded: its struct array (owned, moved out of the import path),
   and the plan over it. */
typedef struct {
    struct ArrowArray array;
    bw_batch_plan plan;
    bw_col *fields;
} batch_part;

static const char *column_name(const struct ArrowSchema *s) { return s->name ? s->name : ""; }

/* TypeError: the column's Arrow type (in words), and why it cannot be used. -1. */
static int set_type_error(const char *column, const struct ArrowSchema *s, const char *why) {
    char words[128];
    bw_arrow_schema_words(s, words, sizeof words);
    PyErr_Format(PyExc_TypeError, "column '%s' has Arrow type %s, %s", column, words, why);
    return -1;
}

/* `"<escaped name>": `, malloc'd. */
static int make_key(bw_col *c) {
    bw_buf key;
    if (bw_buf_init(&key, 32) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = bw_json_string_utf8_ascii(&key, c->name, strlen(c->name));
    if (rc == -2) {
        bw_buf_free(&key);
        PyErr_SetString(PyExc_ValueError, "a column name is not valid UTF-8");
        return -1;
    }
    if (rc < 0 || BW_BUF_APPEND_LITERAL(&key, ": ") < 0) {
        bw_buf_free(&key);
        PyErr_NoMemory();
        return -1;
    }
    c->key = bw_buf_detach(&key, &c->key_len);
    return 0;
}

static const uint8_t *validity_of(const struct ArrowArray *a) {
    if (a->null_count == 0 || a->n_buffers < 1)
        return NULL;
    return (const uint8_t *)a->buffers[0];
}

/* Parses a timestamp's time zone: naive, UTC, or a fixed offset [+-]HH:MM. */
static int parse_tz(const char *tz, bw_col *c) {
    c->tz_offset = 0;
    c->has_tz = *tz != '\0';
    if (!c->has_tz || !strcmp(tz, "UTC") || !strcmp(tz, "Etc/UTC") || !strcmp(tz, "Z") ||
        !strcmp(tz, "GMT") || !strcmp(tz, "utc"))
        return 0;
    if ((tz[0] == '+' || tz[0] == '-') && strlen(tz) == 6 && tz[3] == ':') {
        int ok = 1;
        for (int i = 1; i < 6; i++)
            if (i != 3 && (tz[i] < '0' || tz[i] > '9'))
                ok = 0;
        if (ok) {
            int64_t off = ((tz[1] - '0') * 10 + (tz[2] - '0')) * 3600 + ((tz[4] - '0') * 10 + (tz[5] - '0')) * 60;
            c->tz_offset = tz[0] == '-' ? -off : off;
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError,
                 "column '%s' has timestamps in time zone '%s'; only naive, UTC and fixed-offset "
                 "(+HH:MM) timestamps are supported: cast the column first", c->name, tz);
    return -1;
}

/* Fills c from a column of a batch. as_vector: the column must be the vector. */
static int resolve_column(const struct ArrowSchema *s, const struct ArrowArray *a,
                          int64_t parent_offset, int64_t row_count, int as_vector, int64_t dim,
                          bw_col *c) {
    memset(c, 0, sizeof *c);
    c->name = column_name(s);
    c->offset = parent_offset + a->offset;
    c->null_count = a->null_count;
    c->validity = validity_of(a);
    const char *f = s->format;
    if (s->dictionary != NULL)
        return set_type_error(c->name, s, "dictionary-encoded columns are not supported: decode it first");
    if (as_vector) {
        /* The vectors reader applies the array's own offsets; a record batch's children also
           start at the struct's offset, so read the column as if sliced there. */
        struct ArrowArray shifted = *a;
        shifted.offset = a->offset + parent_offset;
        shifted.length = row_count;
        char why[160];
        c->kind = BW_COL_VECTOR;
        c->validity = NULL;
        if (bw_arrow_vectors_view(s, &shifted, &c->vec, why, sizeof why) < 0) {
            PyErr_Format(PyExc_TypeError, "column '%s' cannot be the vector column: %s", c->name, why);
            return -1;
        }
        if (c->vec.kind == BW_ARROW_FIXED_SIZE_LIST) {
            c->dim = c->vec.list_size;
        } else if (dim >= 0) {
            c->dim = dim;
        } else { /* infer from the first row (a null first row is reported by validation) */
            int64_t first = 0, count = 0;
            c->dim = row_count == 0 || bw_arrow_vectors_row(&c->vec, 0, &first, &count) ? 0 : count;
        }
        return 0;
    }
    static const struct { const char *fmt; bw_col_kind kind; int width; } simple[] = {
        {"c", BW_COL_INT, 1}, {"s", BW_COL_INT, 2}, {"i", BW_COL_INT, 4}, {"l", BW_COL_INT, 8},
        {"C", BW_COL_UINT, 1}, {"S", BW_COL_UINT, 2}, {"I", BW_COL_UINT, 4}, {"L", BW_COL_UINT, 8},
        {"f", BW_COL_FLOAT32, 4}, {"g", BW_COL_FLOAT64, 8}, {"b", BW_COL_BOOL, 0},
        {"u", BW_COL_UTF8, 0}, {"U", BW_COL_LARGE_UTF8, 0}, {"n", BW_COL_NULL, 0},
    };
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
        if (strcmp(f, simple[i].fmt) != 0)
            continue;
        c->kind = simple[i].kind;
        c->width = simple[i].width;
        if (c->kind == BW_COL_NULL) {
            c->validity = NULL;
        } else if (c->kind == BW_COL_UTF8 || c->kind == BW_COL_LARGE_UTF8) {
            c->values = a->buffers[1];
            c->data = (const char *)a->buffers[2];
            if (c->data == NULL) /* no character data at all: every string is empty */
                c->data = "";
        } else {
            c->values = a->buffers[1];
        }
        return 0;
    }
    if (f[0] == 't' && f[1] == 's' && f[2] != '\0' && f[3] == ':') {
        switch (f[2]) {
        case 's': c->per_second = 1; break;
        case 'm': c->per_second = 1000; break;
        case 'u': c->per_second = 1000000; break;
        case 'n': c->per_second = 1000000000; break;
        default: return set_type_error(c->name, s, "which is not a timestamp unit bulkwire knows");
        }
        c->kind = BW_COL_TIMESTAMP;
        c->width = 8;
        c->values = a->buffers[1];
        return parse_tz(f + 4, c);
    }
    return set_type_error(c->name, s,
                          "which cannot be a document field (supported: integers, floats, booleans, "
                          "strings, timestamps; lists only as the vector column): leave it out with "
                          "columns=, or cast it");
}

static Py_ssize_t find_child(const struct ArrowSchema *schema, const char *name) {
    for (int64_t i = 0; i < schema->n_children; i++)
        if (schema->children[i]->name && !strcmp(schema->children[i]->name, name))
            return (Py_ssize_t)i;
    return -1;
}

typedef struct {
    const char *id_column;
    const char *vector_column; /* or NULL */
    PyObject *fields;          /* tuple of str */
    const char *prefix;
    size_t prefix_len;         /* escaped */
    const char *prefix_raw;    /* UTF-8, unescaped (the str's own) */
    size_t prefix_raw_len;
    const char *metadata;
    Py_ssize_t metadata_len;
    int shortest;
    int64_t dim;
} options;

static void part_clear(batch_part *part) {
    if (part->fields != NULL) {
        for (size_t i = 0; i < part->plan.n_fields; i++)
            free(part->fields[i].key);
        PyMem_Free(part->fields);
        part->fields = NULL;
    }
    bw_arrow_release_array(&part->array);
}

static int build_plan(const struct ArrowSchema *schema, batch_part *part, const options *o) {
    const struct ArrowArray *a = &part->array;
    if (strcmp(schema->format, "+s") != 0 || schema->n_children != a->n_children) {
        char words[128];
        bw_arrow_schema_words(schema, words, sizeof words);
        PyErr_Format(PyExc_TypeError, "expected a record batch (an Arrow struct array), got Arrow type %s",
                     words);
        return -1;
    }
    bw_batch_plan *p = &part->plan;
    memset(p, 0, sizeof *p);
    p->length = a->length;
    p->prefix = o->prefix;
    p->prefix_len = o->prefix_len;
    p->prefix_raw = o->prefix_raw;
    p->prefix_raw_len = o->prefix_raw_len;
    p->metadata = o->metadata;
    p->metadata_len = (size_t)o->metadata_len;
    p->float32_shortest = o->shortest;
    Py_ssize_t idx = find_child(schema, o->id_column);
    if (idx < 0) {
        PyErr_Format(PyExc_ValueError, "id column '%s' is not in the batch", o->id_column);
        return -1;
    }
    if (resolve_column(schema->children[idx], a->children[idx], a->offset, a->length, 0, -1, &p->id) < 0)
        return -1;
    if (p->id.kind != BW_COL_INT && p->id.kind != BW_COL_UINT && p->id.kind != BW_COL_UTF8 &&
        p->id.kind != BW_COL_LARGE_UTF8) {
        char words[128];
        bw_arrow_schema_words(schema->children[idx], words, sizeof words);
        PyErr_Format(PyExc_TypeError, "id column '%s' must hold integers or strings, not Arrow type %s",
                     o->id_column, words);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(o->fields);
    part->fields = PyMem_Calloc((size_t)(n ? n : 1), sizeof(bw_col));
    if (part->fields == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(o->fields, i));
        if (name == NULL)
            return -1;
        idx = find_child(schema, name);
        if (idx < 0) {
            PyErr_Format(PyExc_ValueError, "column '%s' is not in the batch", name);
            return -1;
        }
        int as_vector = o->vector_column != NULL && !strcmp(name, o->vector_column);
        bw_col *c = &part->fields[i];
        if (resolve_column(schema->children[idx], a->children[idx], a->offset, a->length, as_vector,
                           o->dim, c) < 0)
            return -1;
        p->n_fields = (size_t)i + 1;
        if (make_key(c) < 0)
            return -1;
    }
    p->fields = part->fields;
    return 0;
}

/* Raises bulkwire.errors.RowError(column, row, reason): its attributes name the row, so a
   caller that numbers rows otherwise (load_parquet's take) renames it without parsing text.
   Always -1. */
static int set_row_error(const char *column, int64_t row, const char *reason) {
    PyObject *name = PyUnicode_DecodeUTF8(column, (Py_ssize_t)strlen(column), "replace");
    PyObject *args = name != NULL ? Py_BuildValue("(NLs)", name, (long long)row, reason) : NULL;
    if (args != NULL) {
        bw_raise(BW_ERROR_ROW, args, NULL);
        Py_DECREF(args);
    }
    return -1;
}

static int validate_part(batch_part *part, int64_t row_base) {
    bw_batch_error err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bw_batch_validate(&part->plan, &err);
    Py_END_ALLOW_THREADS
    if (rc == 0)
        return 0;
    if (err.is_type_error) {
        PyErr_Format(PyExc_TypeError, "column '%s', row %lld: %s", err.column,
                     (long long)(row_base + err.row), err.message);
        return -1;
    }
    return set_row_error(err.column, row_base + err.row, err.message);
}

/* One buffer of a batch's text written ahead: memory of the writers' buffer pool. */
typedef struct {
    char *data;
    size_t len, cap;
} text_buffer;

struct bw_batch_job {
    bw_arrow_source src;
    int opened;
    batch_part *parts;
    size_t n_parts, cap_parts;
    int64_t rows;
    bw_buf prefix;
    PyObject *prefix_str; /* the prefix str (new reference): its UTF-8 is each plan's prefix_raw */
    PyObject *fields;
    Py_buffer metadata;
    /* the text written ahead (bw_batch_job_write_ahead), in order; a buffer taken by the
       writer is NULL here */
    text_buffer *text;
    size_t n_text, cap_text;
};

/* Text buffers of batches written ahead that no writer has taken yet, and their bytes: a
   test's measure that every error path gives them back. */
static atomic_size_t ahead_buffers, ahead_bytes;

/* Gives the buffer back to the pool and forgets it. No GIL needed. */
static void text_buffer_release(text_buffer *t) {
    if (t->data == NULL)
        return;
    atomic_fetch_sub(&ahead_buffers, 1);
    atomic_fetch_sub(&ahead_bytes, t->cap);
    bw_pool_release(t->data, t->cap);
    t->data = NULL;
}

/* Gives every text buffer of the job back to the pool. No GIL needed. */
static void job_text_clear(bw_batch_job *job) {
    for (size_t i = 0; i < job->n_text; i++)
        text_buffer_release(&job->text[i]);
    free(job->text);
    job->text = NULL;
    job->n_text = job->cap_text = 0;
}

void bw_batch_job_free(bw_batch_job *job) {
    if (job == NULL)
        return;
    job_text_clear(job);
    for (size_t k = 0; k < job->cap_parts; k++)
        part_clear(&job->parts[k]);
    PyMem_Free(job->parts);
    if (job->opened)
        bw_arrow_source_close(&job->src);
    Py_XDECREF(job->fields);
    Py_XDECREF(job->prefix_str);
    bw_buf_free(&job->prefix);
    if (job->metadata.buf != NULL)
        PyBuffer_Release(&job->metadata);
    PyMem_Free(job);
}

int64_t bw_batch_job_rows(const bw_batch_job *job) { return job->rows; }

/* Checks fields (a sequence of column names, none a member the body writes itself, none
   twice); job->fields becomes their tuple. 0, or -1 with an exception set. */
static int take_fields(bw_batch_job *job, PyObject *fields_arg) {
    PyObject *fields = job->fields = PySequence_Tuple(fields_arg);
    if (fields == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "fields must be a sequence of column names (str)");
            return -1;
        }
        /* Each would be a second member of that name in the document: the body never holds
           an "Id" member and writes "@metadata" itself (bulkwire.conventions). */
        if (PyUnicode_CompareWithASCIIString(name, "Id") == 0 ||
            PyUnicode_CompareWithASCIIString(name, "@metadata") == 0) {
            PyErr_Format(PyExc_ValueError, "fields[%zd] is %R, which a document body cannot hold "
                         "as a field (see bulkwire.conventions)", i, name);
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            int same = PyUnicode_Compare(name, PyTuple_GET_ITEM(fields, j));
            if (same == -1 && PyErr_Occurred())
                return -1;
            if (same == 0) {
                PyErr_Format(PyExc_ValueError, "fields[%zd] repeats column %R", i, name);
                return -1;
            }
        }
    }
    return 0;
}

/* The id prefix, escaped as the id is (raw UTF-8), into job->prefix; o gets its lengths and
   its unescaped UTF-8 (the id rule judges prefix and id together). 0, or -1 with an
   exception set. */
static int take_prefix(bw_batch_job *job, PyObject *prefix_obj, options *o) {
    if (bw_buf_init(&job->prefix, 32) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (prefix_obj != NULL) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(prefix_obj, &n);
        if (s == NULL)
            return -1;
        if (bw_json_string_utf8(&job->prefix, s, (size_t)n) != 0) { /* raw UTF-8, as the id */
            PyErr_NoMemory();
            return -1;
        }
        memmove(job->prefix.data, job->prefix.data + 1, job->prefix.len - 2); /* drop the quotes */
        job->prefix.len -= 2;
        job->prefix_str = Py_NewRef(prefix_obj); /* keeps s alive as long as the job */
        o->prefix_raw = s;
        o->prefix_raw_len = (size_t)n;
    }
    o->prefix = job->prefix.data;
    o->prefix_len = job->prefix.len;
    return 0;
}

/* Collects the record batches (one for __arrow_c_array__, all of a stream), each validated
   by the import path before it is looked at. 0, or -1 with an exception set. */
static int take_parts(bw_batch_job *job, PyObject *batch) {
    if (bw_arrow_source_open(batch, &job->src) < 0)
        return -1;
    job->opened = 1;
    int more;
    while ((more = bw_arrow_source_next(&job->src)) == 1) {
        if (job->n_parts == job->cap_parts) {
            size_t new_cap = job->cap_parts ? job->cap_parts * 2 : 4;
            batch_part *grown = PyMem_Realloc(job->parts, new_cap * sizeof *grown);
            if (grown == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            memset(grown + job->cap_parts, 0, (new_cap - job->cap_parts) * sizeof *grown);
            job->parts = grown;
            job->cap_parts = new_cap;
        }
        bw_arrow_source_take(&job->src, &job->parts[job->n_parts].array);
        job->n_parts++;
    }
    return more < 0 ? -1 : 0;
}

bw_batch_job *bw_batch_job_open(PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"batch", "id_column", "fields", "vector_column", "id_prefix",
                             "metadata", "float32", "dim", "row_base", NULL};
    PyObject *batch, *fields_arg, *vector_obj = Py_None, *prefix_obj = NULL;
    const char *id_column;
    long long dim = -1, row_base = 0;
    int shortest = 0;
    bw_batch_job *job = PyMem_Calloc(1, sizeof *job);
    if (job == NULL)
        return (bw_batch_job *)PyErr_NoMemory();
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OsO|$OUy*O&LL", kwlist, &batch, &id_column,
                                     &fields_arg, &vector_obj, &prefix_obj, &job->metadata,
                                     bw_float32_mode_converter, &shortest, &dim, &row_base))
        goto failed;
    options o = {0};
    o.id_column = id_column;
    o.dim = dim;
    o.shortest = shortest;
    if (job->metadata.buf == NULL) {
        o.metadata = "{}";
        o.metadata_len = 2;
    } else {
        o.metadata = job->metadata.buf;
        o.metadata_len = job->metadata.len;
    }
    if (vector_obj != Py_None) {
        if (!PyUnicode_Check(vector_obj)) {
            PyErr_SetString(PyExc_TypeError, "vector_column must be a str or None");
            goto failed;
        }
        if ((o.vector_column = PyUnicode_AsUTF8(vector_obj)) == NULL)
            goto failed;
    }
    if (take_fields(job, fields_arg) < 0)
        goto failed;
    o.fields = job->fields;
    if (take_prefix(job, prefix_obj, &o) < 0 || take_parts(job, batch) < 0)
        goto failed;
    /* Plan and validate everything before writing anything. */
    int64_t base = row_base;
    for (size_t k = 0; k < job->n_parts; k++) {
        if (build_plan(&job->src.schema, &job->parts[k], &o) < 0 ||
            validate_part(&job->parts[k], base) < 0)
            goto failed;
        base += job->parts[k].plan.length;
        job->rows += job->parts[k].plan.length;
    }
    return job;
failed:
    bw_batch_job_free(job);
    return NULL;
}

/* Where a job's writing stands: the part, and the row of it, written next. */
typedef struct {
    size_t part;
    int64_t row;
    int first; /* no ',' before the next row */
} write_position;

/* The one encode loop, and the one place the output is cut: appends the commands of the
   rows from *at on, each after a ',' (but the body's first), until `out` holds more than
   `threshold` bytes or every row is written (at->part == job->n_parts). No Python: run it
   without the GIL. 0, or -1 out of memory (`out` then ends inside a command). */
static int write_rows(const bw_batch_job *job, write_position *at, bw_buf *out, size_t threshold) {
    for (; at->part < job->n_parts; at->part++, at->row = 0) {
        const bw_batch_plan *p = &job->parts[at->part].plan;
        for (; at->row < p->length; at->row++) {
            if (out->len > threshold)
                return 0;
            if ((!at->first && bw_buf_append(out, ",", 1) < 0) || bw_batch_write_row(p, at->row, out) < 0)
                return -1;
            at->first = 0;
        }
    }
    return 0;
}

int bw_batch_job_write(bw_batch_job *job, bw_buf *out, int first, size_t threshold,
                       bw_batch_sink full, void *ctx) {
    write_position at = {0, 0, first};
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = write_rows(job, &at, out, threshold);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            return -1;
        }
        if (out->len > threshold && (rc = full(ctx, out)) <= 0)
            return rc;
        if (at.part == job->n_parts)
            return 1;
    }
}

/* Appends `out`'s memory to the job's text (`out` is then empty, without memory). 0, or -1
   out of memory (`out` untouched). No GIL needed. */
static int job_text_push(bw_batch_job *job, bw_buf *out) {
    if (job->n_text == job->cap_text) {
        size_t cap = job->cap_text ? job->cap_text * 2 : 8;
        text_buffer *grown = realloc(job->text, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        job->text = grown;
        job->cap_text = cap;
    }
    job->text[job->n_text++] = (text_buffer){out->data, out->len, out->cap};
    out->data = NULL;
    out->len = out->cap = 0;
    return 0;
}

/* Writes the text of every row into buffers of the writers' pool, cut where write_rows cuts
   at `threshold`, the first starting with ','. No Python: run it without the GIL. 0, or -1
   out of memory (every buffer then given back). */
static int job_write_ahead(bw_batch_job *job, size_t threshold) {
    write_position at = {0, 0, 0};
    text_buffer cur = {NULL, 0, 0};
    do {
        cur.data = bw_pool_acquire(bw_pool_body_capacity(threshold), &cur.cap);
        if (cur.data == NULL)
            goto failed;
        atomic_fetch_add(&ahead_buffers, 1);
        atomic_fetch_add(&ahead_bytes, cur.cap);
        bw_buf out = {.data = cur.data, .len = 0, .cap = cur.cap};
        int rc = write_rows(job, &at, &out, threshold);
        /* the buffer may have moved as it grew: account for the one it is now */
        atomic_fetch_sub(&ahead_bytes, cur.cap);
        atomic_fetch_add(&ahead_bytes, out.cap);
        cur = (text_buffer){out.data, out.len, out.cap};
        if (rc < 0 || job_text_push(job, &out) < 0)
            goto failed;
        cur.data = NULL;
    } while (at.part < job->n_parts);
    return 0;
failed:
    text_buffer_release(&cur);
    job_text_clear(job);
    return -1;
}

int bw_batch_job_write_ahead(bw_batch_job *job, size_t threshold) {
    int rc;
    Py_BEGIN_ALLOW_THREADS
    job_text_clear(job);
    rc = job->rows > 0 ? job_write_ahead(job, threshold) : 0;
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
}

size_t bw_batch_job_text_count(const bw_batch_job *job) { return job->n_text; }

void bw_batch_job_drop_text(bw_batch_job *job) { job_text_clear(job); }

char *bw_batch_job_take_text(bw_batch_job *job, size_t i, size_t *len, size_t *cap) {
    text_buffer *t = &job->text[i];
    char *data = t->data;
    *len = t->len;
    *cap = t->cap;
    if (data != NULL) {
        atomic_fetch_sub(&ahead_buffers, 1);
        atomic_fetch_sub(&ahead_bytes, t->cap);
    }
    t->data = NULL;
    return data;
}

/* bw_batch_sink of encode_batch: the buffer's bytes become the next item of the list. */
static int append_buffer(void *list, bw_buf *out) {
    PyObject *buffer = PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->len);
    if (buffer == NULL)
        return -1;
    int rc = PyList_Append(list, buffer);
    Py_DECREF(buffer);
    out->len = 0;
    return rc < 0 ? -1 : 1;
}

/* Takes the keyword `name` out of kwargs (a dict of the caller's own): 0 when absent (*keep
   untouched), 1 with *keep a new reference to its value, or -1 with an exception set. */
static int pop_keyword(PyObject *kwargs, const char *name, PyObject **keep) {
    PyObject *value = PyDict_GetItemString(kwargs, name);
    if (value == NULL)
        return 0;
    *keep = Py_NewRef(value);
    return PyDict_DelItemString(kwargs, name) < 0 ? -1 : 1;
}

/* Reads buffer_size, an int, which must be positive, into *size. 0, or -1 with an exception
   set. */
static int buffer_size_of(PyObject *obj, Py_ssize_t *size) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "buffer_size must be an int, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    if ((*size = PyLong_AsSsize_t(obj)) == -1 && PyErr_Occurred())
        return -1;
    if (*size <= 0) {
        PyErr_SetString(PyExc_ValueError, "buffer_size must be positive");
        return -1;
    }
    return 0;
}

/* New reference: the list of buffers, or NULL with an exception set. */
static PyObject *module_encode_batch(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    Py_ssize_t buffer_size = 1 << 20;
    int first = 0;
    PyObject *rest = NULL, *first_obj = NULL, *size_obj = NULL, *result = NULL;
    bw_batch_job *job = NULL;
    bw_buf out = {0};
    /* first and buffer_size are this function's own; the rest describe the batch */
    if (kwargs != NULL) {
        if ((rest = PyDict_Copy(kwargs)) == NULL || pop_keyword(rest, "first", &first_obj) < 0 ||
            pop_keyword(rest, "buffer_size", &size_obj) < 0)
            goto done;
        if (first_obj != NULL && (first = PyObject_IsTrue(first_obj)) < 0)
            goto done;
        if (size_obj != NULL && buffer_size_of(size_obj, &buffer_size) < 0)
            goto done;
    }
    if ((job = bw_batch_job_open(args, rest)) == NULL)
        goto done;
    if ((result = PyList_New(0)) == NULL)
        goto done;
    size_t threshold = (size_t)buffer_size;
    if (bw_buf_init(&out, threshold + threshold / 4 + 4096) < 0) {
        PyErr_NoMemory();
        goto failed;
    }
    if (bw_batch_job_write(job, &out, first, threshold, append_buffer, result) < 0 ||
        (out.len > 0 && append_buffer(result, &out) < 0))
        goto failed;
    goto done;
failed:
    Py_CLEAR(result);
done:
    bw_batch_job_free(job);
    bw_buf_free(&out);
    Py_XDECREF(rest);
    Py_XDECREF(first_obj);
    Py_XDECREF(size_obj);
    return result;
}

/* ---- PreparedBatch: a job as a Python object, for CommandWriter.put_batch ---- */

typedef struct {
    PyObject_HEAD
    bw_batch_job *job;
} prepared_object;

static void Prepared_dealloc(prepared_object *self) {
    PyObject_GC_UnTrack(self);
    bw_batch_job_free(self->job);
    bw_heap_free((PyObject *)self);
}

/* New reference. */
static PyObject *Prepared_get_rows(prepared_object *self, void *unused) {
    (void)unused;
    return PyLong_FromLongLong((long long)bw_batch_job_rows(self->job));
}

/* discard() -> None (a new reference): the text written ahead goes back to the pool now,
   for a batch that will not be stored (a failed load): whoever still holds the object (a
   traceback's frame) then holds no text. A later put_batch writes the rows itself. */
static PyObject *Prepared_discard(prepared_object *self, PyObject *unused) {
    (void)unused;
    bw_batch_job_drop_text(self->job);
    Py_RETURN_NONE;
}

static PyMethodDef Prepared_methods[] = {
    {"discard", (PyCFunction)Prepared_discard, METH_NOARGS,
     "discard() -> None\n\nGive the text written ahead (prepare_batch's buffer_size) back to the "
     "writers' pool now: the batch will not be stored. A later put_batch writes its rows."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Prepared_getset[] = {
    {"rows", (getter)Prepared_get_rows, NULL, "Rows of the batch.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Prepared_slots[] = {
    {Py_tp_doc, "An Arrow record batch (or stream of them) imported, planned and validated by "
                "prepare_batch, ready for CommandWriter.put_batch."},
    {Py_tp_dealloc, Prepared_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_getset, Prepared_getset},
    {Py_tp_methods, Prepared_methods},
    {0, NULL},
};

/* Made by prepare_batch only: the type cannot be called. */
static PyType_Spec Prepared_spec = {
    .name = "bulkwire._core.PreparedBatch",
    .basicsize = sizeof(prepared_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Prepared_slots,
};

bw_batch_job *bw_prepared_batch_job(PyObject *prepared) {
    /* a PreparedBatch (it has no subclass), known by its deallocator without a lookup */
    if (Py_TYPE(prepared)->tp_dealloc != (destructor)Prepared_dealloc) {
        PyErr_Format(PyExc_TypeError, "expected a PreparedBatch (from prepare_batch), not %.100s",
                     Py_TYPE(prepared)->tp_name);
        return NULL;
    }
    return ((prepared_object *)prepared)->job;
}

/* New reference: the PreparedBatch, or NULL with an exception set. */
static PyObject *module_prepare_batch(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    PyObject *rest = NULL, *size_obj = NULL, *result = NULL;
    Py_ssize_t buffer_size = 0;
    bw_batch_job *job = NULL;
    /* buffer_size is this function's own; the rest describe the batch */
    if (kwargs != NULL && ((rest = PyDict_Copy(kwargs)) == NULL ||
                           pop_keyword(rest, "buffer_size", &size_obj) < 0))
        goto done;
    if (size_obj != NULL && size_obj != Py_None && buffer_size_of(size_obj, &buffer_size) < 0)
        goto done;
    if ((job = bw_batch_job_open(args, rest)) == NULL)
        goto done;
    if (buffer_size > 0 && bw_batch_job_write_ahead(job, (size_t)buffer_size) < 0)
        goto done;
    PyTypeObject *type = bw_state_type(BW_TYPE_PREPARED_BATCH); /* borrowed */
    prepared_object *self = type != NULL ? (prepared_object *)type->tp_alloc(type, 0) : NULL;
    if (self == NULL)
        goto done;
    self->job = job;
    job = NULL;
    result = (PyObject *)self;
done:
    bw_batch_job_free(job);
    Py_XDECREF(rest);
    Py_XDECREF(size_obj);
    return result;
}

/* batch_text_memory() -> (buffers, bytes): the text buffers of batches written ahead that
   no writer has taken yet (a PreparedBatch alive holds them). New reference. */
static PyObject *module_batch_text_memory(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return Py_BuildValue("(nn)", (Py_ssize_t)atomic_load(&ahead_buffers),
                         (Py_ssize_t)atomic_load(&ahead_bytes));
}

static PyMethodDef encode_batch_functions[] = {
    {"encode_batch", (PyCFunction)(void (*)(void))module_encode_batch, METH_VARARGS | METH_KEYWORDS,
     "encode_batch(batch, id_column, fields, *, vector_column=None, id_prefix='', metadata=b'{}', "
     "float32='widen', dim=-1, first=False, row_base=0, buffer_size=1 << 20) -> list[bytes]\n\n"
     "Bulk insert commands for every row of an Arrow record batch (or stream of them), joined by ',' "
     "(with a leading ',' unless first), in buffers of more than buffer_size bytes (the last may be "
     "smaller), cut where CommandWriter.put_batch hands its buffers over. Every row is validated before anything is written: a bad row raises "
     "bulkwire.errors.RowError (a ValueError) with its column, row and reason as attributes."},
    {"prepare_batch", (PyCFunction)(void (*)(void))module_prepare_batch, METH_VARARGS | METH_KEYWORDS,
     "prepare_batch(batch, id_column, fields, *, vector_column=None, id_prefix='', metadata=b'{}', "
     "float32='widen', dim=-1, row_base=0, buffer_size=None) -> PreparedBatch\n\n"
     "Imports, plans and validates an Arrow record batch (or stream of them) as encode_batch "
     "does (the validation runs with the GIL released): a bad row raises "
     "bulkwire.errors.RowError. Without buffer_size nothing is written: CommandWriter.put_batch "
     "writes the rows into its own buffers. With buffer_size, the rows' text is written here, "
     "with the GIL released, into buffers of the writers' pool cut as encode_batch cuts them "
     "(each but the last past buffer_size; the first starts with ','), which put_batch then "
     "takes over without a copy."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef encode_batch_test_hooks[] = {
    {"batch_text_memory", module_batch_text_memory, METH_NOARGS,
     "batch_text_memory() -> (buffers, bytes): the text buffers of prepared batches that no "
     "writer has taken yet, and their bytes."},
    {NULL, NULL, 0, NULL},
};

int bw_encode_batch_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, encode_batch_test_hooks);
}

int bw_encode_batch_add_to_module(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_PREPARED_BATCH, &Prepared_spec) < 0)
        return -1;
    return PyModule_AddFunctions(module, encode_batch_functions);
}
