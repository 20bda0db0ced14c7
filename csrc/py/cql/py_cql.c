/* The CQL statement layer's functions: partition tokens, the schema check of an Arrow
   schema against a prepared statement's columns, and an Arrow batch's rows as EXECUTE
   bodies with their tokens (core: cql_values.c, cql_statement.c, murmur3.c); the token ring
   is py_cql_ring.c's. */
#include "py_cql.h"

#include "py_arrow.h"
#include "py_errors.h"
#include "py_state.h"
#include "py_encode_vector.h"

#include "cql_result.h"
#include "cql_statement.h"
#include "murmur3.h"


/* The UTF-8 of a str argument (*n bytes), or NULL with a TypeError naming `what`. */
static const char *str_arg(PyObject *arg, Py_ssize_t *n, const char *what) {
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, n) : NULL;
    if (text == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "expected %s as str", what);
    return text;
}

/* The bytes a writer put in out (rc 0), or MemoryError (rc < 0); out is freed. New
   reference, or NULL. */
static PyObject *written_bytes(int rc, bw_buf *out) {
    PyObject *result = rc < 0 ? PyErr_NoMemory()
                              : PyBytes_FromStringAndSize(out->data ? out->data : "",
                                                          (Py_ssize_t)out->len);
    bw_buf_free(out);
    return result;
}

/* ---------------------------------------------------------------- the bound columns */

/* What a statement's bound columns need while a batch is encoded. */
typedef struct {
    Py_ssize_t n;
    bw_cql_column *cols;
    PyObject *name_tuple; /* the names, held: a tuple, so that no other thread can drop an
                             item while the GIL is released (owned) */
    const char **names;   /* UTF-8 of name_tuple's items (borrowed from them) */
    PyObject **codecs;    /* a VectorCodec per vector column, else NULL (owned) */
    int *pk;
    int n_pk;
} bound_columns;

static void bound_free(bound_columns *b) {
    for (Py_ssize_t i = 0; b->codecs != NULL && i < b->n; i++)
        Py_XDECREF(b->codecs[i]);
    PyMem_Free(b->cols);
    PyMem_Free(b->names);
    PyMem_Free(b->codecs);
    PyMem_Free(b->pk);
    Py_XDECREF(b->name_tuple);
    memset(b, 0, sizeof *b);
}

/* Raises the class of kind (*args); args (a new reference, or NULL when building it failed)
   is released. */
static void raise_with(bw_error_kind kind, PyObject *args) {
    if (args != NULL)
        bw_raise(kind, args, NULL);
    Py_XDECREF(args);
}

/* Raises bulkwire.errors.SchemaMismatchError(message, column, arrow_type, cql_type). */
static void schema_mismatch(const char *message, const char *column, const char *arrow_type,
                            const char *cql_type) {
    raise_with(BW_ERROR_SCHEMA_MISMATCH,
                       Py_BuildValue("(ssss)", message, column, arrow_type, cql_type));
}

/* The vector serializer of VectorCodec (driver_compat: float32 as the driver writes it)
   over one Arrow row. */
static void fill_vector(const void *ctx, const bw_arrow_vectors *v, int64_t first, char *dst) {
    const bw_vector_codec *codec = ctx;
    /* Arrow memory is native order; single bytes are never swapped */
    bw_row_source s = {.arrow = v, .elem_stride = v->value_width, .src_width = v->value_width,
                       .swap = v->value_width > 1 && !BW_NATIVE_BIG_ENDIAN};
    bw_vec_fill_row(codec, &s, v->values + first * v->value_width, dst);
}

/* The child of struct schema `schema` named `name`, or -1. */
static int64_t child_named(const struct ArrowSchema *schema, const char *name) {
    for (int64_t i = 0; schema->children != NULL && i < schema->n_children; i++)
        if (schema->children[i] != NULL && schema->children[i]->name != NULL &&
            strcmp(schema->children[i]->name, name) == 0)
            return i;
    return -1;
}

/* Reads names (a sequence of str), types (CQL text each) and pk_indexes, and checks the
   record batch schema against them: every name a column of the schema, each Arrow type
   bindable to its CQL type. 0, or -1 with an exception (SchemaMismatchError for a column). */
static int bound_plan(bound_columns *b, const struct ArrowSchema *schema, PyObject *names,
                      PyObject *types, PyObject *pk_indexes) {
    memset(b, 0, sizeof *b);
    PyObject *n_seq = NULL, *t_seq = NULL, *k_seq = NULL;
    int rc = -1;
    if ((b->name_tuple = PySequence_Tuple(names)) == NULL ||
        (n_seq = PySequence_Fast(b->name_tuple, "names must be a sequence of str")) == NULL ||
        (t_seq = PySequence_Fast(types, "types must be a sequence of str")) == NULL ||
        (k_seq = PySequence_Fast(pk_indexes, "pk_indexes must be a sequence of int")) == NULL)
        goto cleanup;
    b->n = PySequence_Fast_GET_SIZE(n_seq);
    if (PySequence_Fast_GET_SIZE(t_seq) != b->n) {
        PyErr_Format(PyExc_ValueError, "names has %zd items, types %zd: one type per name", b->n,
                     PySequence_Fast_GET_SIZE(t_seq));
        goto cleanup;
    }
    if (b->n > 65535) {
        PyErr_Format(PyExc_ValueError, "%zd bound columns: a statement binds at most 65535",
                     b->n);
        goto cleanup;
    }
    Py_ssize_t n_pk = PySequence_Fast_GET_SIZE(k_seq);
    if (n_pk > b->n || n_pk > BW_CQL_MAX_PK) {
        PyErr_Format(PyExc_ValueError, "pk_indexes has %zd items: more than names or than %d",
                     n_pk, BW_CQL_MAX_PK);
        goto cleanup;
    }
    b->cols = PyMem_Calloc((size_t)b->n + 1, sizeof *b->cols);
    b->names = PyMem_Calloc((size_t)b->n + 1, sizeof *b->names);
    b->codecs = PyMem_Calloc((size_t)b->n + 1, sizeof *b->codecs);
    b->pk = PyMem_Calloc((size_t)n_pk + 1, sizeof *b->pk);
    if (b->cols == NULL || b->names == NULL || b->codecs == NULL || b->pk == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t k = 0; k < n_pk; k++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(k_seq, k));
        if (v == -1 && PyErr_Occurred())
            goto cleanup;
        if (v < 0 || v >= b->n) {
            PyErr_Format(PyExc_ValueError, "pk_indexes[%zd] = %ld is not the index of a bound "
                         "column (0 to %zd)", k, v, b->n - 1);
            goto cleanup;
        }
        b->pk[k] = (int)v;
    }
    b->n_pk = (int)n_pk;
    if (schema->format == NULL || strcmp(schema->format, "+s") != 0) {
        PyErr_SetString(PyExc_TypeError, "expected a record batch or table (an Arrow struct of "
                        "columns)");
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(n_seq, i);
        PyObject *type = PySequence_Fast_GET_ITEM(t_seq, i);
        if (!PyUnicode_Check(name) || !PyUnicode_Check(type)) {
            PyErr_Format(PyExc_TypeError, "names[%zd] and types[%zd] must be str", i, i);
            goto cleanup;
        }
        Py_ssize_t tlen;
        const char *tname = PyUnicode_AsUTF8AndSize(type, &tlen);
        b->names[i] = PyUnicode_AsUTF8(name);
        if (tname == NULL || b->names[i] == NULL)
            goto cleanup;
        bw_cql_type t;
        char err[400];
        if (bw_cql_type_parse(tname, (size_t)tlen, &t, err, sizeof err) < 0) {
            PyErr_Format(PyExc_ValueError, "column '%s': %s", b->names[i], err);
            goto cleanup;
        }
        int64_t c = child_named(schema, b->names[i]);
        char cql[64];
        bw_cql_type_text(&t, cql, sizeof cql);
        if (c < 0) {
            snprintf(err, sizeof err, "column '%.100s' (CQL %s) is not a column of the Arrow "
                     "data", b->names[i], cql);
            schema_mismatch(err, b->names[i], "", cql);
            goto cleanup;
        }
        const struct ArrowSchema *cs = schema->children[c];
        const char *child_format = cs->n_children == 1 && cs->children != NULL &&
                                           cs->children[0] != NULL
                                       ? cs->children[0]->format : NULL;
        if (cs->dictionary != NULL) {
            snprintf(err, sizeof err, "column '%.100s': Arrow dictionary-encoded data cannot be "
                     "bound to CQL %s: decode it first (pyarrow.compute.cast to the value type)",
                     b->names[i], cql);
            schema_mismatch(err, b->names[i], "dictionary", cql);
            goto cleanup;
        }
        if (bw_cql_column_plan(b->names[i], cs->format, child_format, &t, &b->cols[i], err,
                               sizeof err) < 0) {
            char words[128];
            bw_arrow_type_words(cs->format, child_format, words, sizeof words);
            schema_mismatch(err, b->names[i], words, cql);
            goto cleanup;
        }
        if (t.id == BW_CQL_T_VECTOR) {
            PyObject *kw = Py_BuildValue("{s:O}", "driver_compat", Py_True); /* new ref */
            PyObject *args = kw ? Py_BuildValue("(si)", bw_cql_type_name(t.element),
                                                (int)t.dimension) : NULL;
            PyObject *codec_type = args ? (PyObject *)bw_state_type(BW_TYPE_VECTOR_CODEC)
                                        : NULL; /* borrowed */
            b->codecs[i] = codec_type ? PyObject_Call(codec_type, args, kw) : NULL;
            Py_XDECREF(args);
            Py_XDECREF(kw);
            if (b->codecs[i] == NULL)
                goto cleanup;
            if (((bw_vector_codec *)b->codecs[i])->row_size != b->cols[i].wire_width) {
                PyErr_Format(PyExc_SystemError, "column '%s': a %s row is %zd bytes, the "
                             "plan says %d", b->names[i], cql,
                             ((bw_vector_codec *)b->codecs[i])->row_size,
                             b->cols[i].wire_width);
                goto cleanup;
            }
            b->cols[i].fill = fill_vector;
            b->cols[i].fill_ctx = b->codecs[i];
        }
    }
    rc = 0;
cleanup:
    Py_XDECREF(n_seq);
    Py_XDECREF(t_seq);
    Py_XDECREF(k_seq);
    if (rc < 0)
        bound_free(b);
    return rc;
}

/* ---------------------------------------------------------------- module functions */

/* cql_check_schema(schema, names, types) -> None. Raises SchemaMismatchError naming the
   first column whose Arrow type cannot be bound. Returns a new reference (None). */
static PyObject *module_cql_check_schema(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *schema_obj, *names, *types;
    if (!PyArg_ParseTuple(args, "OOO:cql_check_schema", &schema_obj, &names, &types))
        return NULL;
    PyObject *capsule = PyObject_CallMethod(schema_obj, "__arrow_c_schema__", NULL); /* new */
    if (capsule == NULL)
        return NULL;
    struct ArrowSchema *schema = PyCapsule_GetPointer(capsule, "arrow_schema");
    PyObject *result = NULL;
    if (schema != NULL) {
        bound_columns b;
        PyObject *none = PyTuple_New(0); /* new reference: no partition key here */
        if (none != NULL && bound_plan(&b, schema, names, types, none) == 0) {
            bound_free(&b);
            result = Py_NewRef(Py_None);
        }
        Py_XDECREF(none);
    }
    Py_DECREF(capsule);
    return result;
}

/* Raises bulkwire.errors.RowError for a row the core refused, MemoryError for -1. */
static void raise_row_error(int rc, const bw_cql_row_error *e, const bound_columns *b) {
    if (rc == -1 || e->column < 0) {
        PyErr_NoMemory();
        return;
    }
    raise_with(BW_ERROR_ROW, Py_BuildValue("(sLs)", b->names[e->column],
                                                 (long long)e->row, e->reason));
}

/* Grows an int64 array held in a bw_buf by n items; a pointer to the first new one (never
   NULL, also for n == 0), or NULL when out of memory. */
static int64_t *grow_i64(bw_buf *b, int64_t n) {
    if ((uint64_t)n > SIZE_MAX / 8 - 1 || bw_buf_reserve(b, (size_t)n * 8 + 8) < 0)
        return NULL;
    int64_t *p = (int64_t *)(void *)(b->data + b->len);
    b->len += (size_t)n * 8;
    return p;
}

/* Marks the bound columns whose byte in `unset` (a bytes-like of one byte per bound column)
   is not 0: their nulls are written unset. 0, or -1 with an exception (not bytes-like, or
   of another length). */
static int set_unset(bound_columns *b, PyObject *unset) {
    Py_buffer flags;
    if (PyObject_GetBuffer(unset, &flags, PyBUF_SIMPLE) < 0)
        return -1;
    int rc = -1;
    if (flags.len != b->n) {
        PyErr_Format(PyExc_ValueError, "unset has %zd bytes: one per bound column (%zd)",
                     flags.len, b->n);
        goto cleanup;
    }
    const uint8_t *flag = flags.buf;
    for (Py_ssize_t i = 0; i < b->n; i++)
        b->cols[i].null_unset = flag[i] != 0;
    rc = 0;
cleanup:
    PyBuffer_Release(&flags);
    return rc;
}

/* cql_execute_bodies(batch, prepared_id, names, types, pk_indexes, consistency, *,
   first_row=0, serial_consistency=0, timestamp=None, unset=None) -> (bodies, ends,
   tokens).
   Every row of the Arrow record batch / table / stream as the body of an EXECUTE of the
   prepared statement `prepared_id`, binding column names[i] (CQL type types[i]) to bind
   marker i; a null of marker i is written unset (length -2), not null, where byte i of
   unset is not 0. bodies: a
   bytearray of the bodies back to back; ends: bytes of native int64, the end of each row's
   body in bodies; tokens: bytes of native int64, each row's partition token (None when
   pk_indexes is empty). The GIL is released over the rows. Returns a new
   reference. */
static PyObject *module_cql_execute_bodies(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"batch", "prepared_id", "names", "types", "pk_indexes",
                             "consistency", "first_row", "serial_consistency", "timestamp",
                             "unset", NULL};
    PyObject *batch, *names, *types, *pk_indexes, *timestamp = Py_None, *unset = NULL;
    Py_buffer id = {0};
    int consistency, serial = 0;
    long long first_row = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*OOOi|$LiOO:cql_execute_bodies", kwlist,
                                     &batch, &id, &names, &types, &pk_indexes, &consistency,
                                     &first_row, &serial, &timestamp, &unset))
        return NULL;
    bw_arrow_source src;
    bound_columns b;
    int planned = 0, opened = 0;
    bw_buf out = {0}, ends = {0}, tokens = {0};
    PyObject *result = NULL;
    bw_cql_bound st;
    memset(&st, 0, sizeof st);
    if (id.len > 65535) {
        PyErr_SetString(PyExc_ValueError, "prepared_id is longer than 65535 bytes");
        goto cleanup;
    }
    if (consistency < 0 || consistency > 0xffff || serial < 0 || serial > 0xffff) {
        PyErr_SetString(PyExc_ValueError, "consistency levels are 0 to 65535");
        goto cleanup;
    }
    st.id = id.buf;
    st.id_len = (size_t)id.len;
    st.params.consistency = (uint16_t)consistency;
    st.params.serial_consistency = (uint16_t)serial;
    if (timestamp != Py_None) {
        st.params.has_timestamp = 1;
        st.params.timestamp = PyLong_AsLongLong(timestamp);
        if (st.params.timestamp == -1 && PyErr_Occurred())
            goto cleanup;
    }
    if (bw_arrow_source_open(batch, &src) < 0)
        goto cleanup;
    opened = 1;
    int rc;
    int64_t row = first_row;
    while ((rc = bw_arrow_source_next(&src)) == 1) {
        if (!planned) {
            if (bound_plan(&b, &src.schema, names, types, pk_indexes) < 0)
                goto cleanup;
            planned = 1;
            st.columns = b.cols;
            st.names = b.names;
            st.n_columns = (int)b.n;
            st.pk = b.pk;
            st.n_pk = b.n_pk;
            if (unset != NULL && unset != Py_None && set_unset(&b, unset) < 0)
                goto cleanup;
        }
        char err[300];
        for (Py_ssize_t i = 0; i < b.n; i++) {
            int64_t c = child_named(&src.schema, b.names[i]);
            if (bw_cql_column_bind(&b.cols[i], src.schema.children[c], src.array.children[c],
                                   src.array.offset, err, sizeof err) < 0) {
                PyErr_SetString(PyExc_ValueError, err);
                goto cleanup;
            }
        }
        int64_t rows = src.array.length;
        int64_t *e = grow_i64(&ends, rows), *t = st.n_pk ? grow_i64(&tokens, rows) : NULL;
        if (e == NULL || (st.n_pk && t == NULL)) {
            PyErr_NoMemory();
            goto cleanup;
        }
        bw_cql_row_error re;
        int w;
        Py_BEGIN_ALLOW_THREADS
        w = bw_cql_encode_rows(&st, rows, row, &out, e, t, &re);
        Py_END_ALLOW_THREADS
        if (w < 0) {
            raise_row_error(w, &re, &b);
            goto cleanup;
        }
        row += rows;
    }
    if (rc < 0)
        goto cleanup;
    if (!planned) { /* a stream without batches: nothing to check the names against */
        Py_ssize_t n_pk = PyObject_Length(pk_indexes);
        if (n_pk < 0)
            goto cleanup;
        result = n_pk ? Py_BuildValue("(Ny#y#)", PyByteArray_FromStringAndSize("", 0), "",
                                      (Py_ssize_t)0, "", (Py_ssize_t)0)
                      : Py_BuildValue("(Ny#O)", PyByteArray_FromStringAndSize("", 0), "",
                                      (Py_ssize_t)0, Py_None);
        goto cleanup;
    }
    {
        PyObject *bodies = PyByteArray_FromStringAndSize(out.data ? out.data : "",
                                                         (Py_ssize_t)out.len); /* new */
        PyObject *ends_b = bodies ? PyBytes_FromStringAndSize(ends.data ? ends.data : "",
                                                              (Py_ssize_t)ends.len) : NULL;
        PyObject *tok_b = NULL;
        if (ends_b != NULL)
            tok_b = st.n_pk ? PyBytes_FromStringAndSize(tokens.data ? tokens.data : "",
                                                        (Py_ssize_t)tokens.len)
                            : Py_NewRef(Py_None);
        if (tok_b != NULL)
            result = PyTuple_Pack(3, bodies, ends_b, tok_b);
        Py_XDECREF(bodies);
        Py_XDECREF(ends_b);
        Py_XDECREF(tok_b);
    }
cleanup:
    if (opened)
        bw_arrow_source_close(&src);
    if (planned)
        bound_free(&b);
    bw_buf_free(&out);
    bw_buf_free(&ends);
    bw_buf_free(&tokens);
    PyBuffer_Release(&id);
    return result;
}

/* cql_partition_token(components) -> int: the Murmur3 token of a partition key given as its
   components' serialized values (a sequence of bytes-like; one component: the token of its
   bytes). Returns a new reference. */
static PyObject *module_cql_partition_token(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "components must be a sequence of bytes"); /* new */
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    Py_buffer *views = NULL;
    const uint8_t **parts = NULL;
    int32_t *lens = NULL;
    Py_ssize_t got = 0;
    bw_buf scratch = {0};
    if (n < 1 || n > 65535) {
        PyErr_SetString(PyExc_ValueError, "a partition key has 1 to 65535 components");
        goto cleanup;
    }
    views = PyMem_Calloc((size_t)n, sizeof *views);
    parts = PyMem_Calloc((size_t)n, sizeof *parts);
    lens = PyMem_Calloc((size_t)n, sizeof *lens);
    if (views == NULL || parts == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got],
                               PyBUF_SIMPLE) < 0)
            goto cleanup;
        if (views[got].len > INT32_MAX) {
            got++;
            PyErr_SetString(PyExc_ValueError, "a component is longer than 2**31 - 1 bytes");
            goto cleanup;
        }
        parts[got] = views[got].buf;
        lens[got] = (int32_t)views[got].len;
    }
    int64_t token;
    int rc = bw_cql_partition_token(parts, lens, (int)n, &scratch, &token);
    if (rc == -1)
        PyErr_NoMemory();
    else if (rc == -2)
        PyErr_SetString(PyExc_ValueError, "a component of a composite partition key is longer "
                        "than 65535 bytes");
    else
        result = PyLong_FromLongLong(token);
cleanup:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(parts);
    PyMem_Free(lens);
    bw_buf_free(&scratch);
    Py_DECREF(seq);
    return result;
}

/* cql_murmur3_hash(key) -> int: the first half of MurmurHash3 as Murmur3Partitioner
   computes it, before the minimum is mapped (the driver's cassandra.murmur3.murmur3).
   Returns a new reference. */
static PyObject *module_cql_murmur3_hash(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer key;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t h = bw_murmur3_hash(key.buf, (size_t)key.len);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(h);
}

/* cql_type_text(text) -> str: the CQL type text in its canonical form ("vector<float, 3>"),
   or ValueError. Returns a new reference. */
static PyObject *module_cql_type_text(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n;
    const char *text = str_arg(arg, &n, "the CQL type");
    if (text == NULL)
        return NULL;
    bw_cql_type t;
    char err[400], out[64];
    if (bw_cql_type_parse(text, (size_t)n, &t, err, sizeof err) < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    bw_cql_type_text(&t, out, sizeof out);
    return PyUnicode_FromString(out);
}

/* ---------------------------------------------------------------- RESULT */

/* A list of (keyspace, table, name, type) tuples for the metadata's columns (empty with
   No_metadata). New reference, or NULL. */
static PyObject *columns_list(const bw_cql_metadata *m) {
    PyObject *list = PyList_New(0);
    for (int32_t i = 0; list != NULL && m->columns != NULL && i < m->columns_count; i++) {
        const bw_cql_colspec *c = &m->columns[i];
        char type[64];
        bw_cql_type_text(&c->type, type, sizeof type);
        PyObject *item = c->custom != NULL && c->type.id == BW_CQL_T_CUSTOM
            ? Py_BuildValue("(s#s#s#s#)", c->keyspace, (Py_ssize_t)c->keyspace_len, c->table,
                            (Py_ssize_t)c->table_len, c->name, (Py_ssize_t)c->name_len,
                            c->custom, (Py_ssize_t)c->custom_len)
            : Py_BuildValue("(s#s#s#s)", c->keyspace, (Py_ssize_t)c->keyspace_len, c->table,
                            (Py_ssize_t)c->table_len, c->name, (Py_ssize_t)c->name_len, type);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

/* The rows' cells as a list of tuples of bytes (None for null). New reference, or NULL. */
static PyObject *rows_list(const bw_cql_result *r) {
    bw_cql_cursor c = r->rows;
    int32_t cols = r->metadata.columns_count;
    PyObject *list = PyList_New(0);
    for (int32_t i = 0; list != NULL && i < r->rows_count; i++) {
        PyObject *row = PyTuple_New(cols);
        for (int32_t k = 0; row != NULL && k < cols; k++) {
            const uint8_t *p;
            int32_t n;
            bw_cql_get_bytes(&c, &p, &n); /* checked by the parser */
            PyObject *cell = n < 0 ? Py_NewRef(Py_None)
                                   : PyBytes_FromStringAndSize((const char *)p, n);
            if (cell == NULL)
                Py_CLEAR(row);
            else
                PyTuple_SET_ITEM(row, k, cell);
        }
        if (row == NULL || PyList_Append(list, row) < 0)
            Py_CLEAR(list);
        Py_XDECREF(row);
    }
    return list;
}

/* cql_parse_result(body) -> dict: a RESULT body (protocol v4) as a dict with "kind" ("void",
   "rows", "set_keyspace", "prepared", "schema_change") and the kind's fields. ValueError
   for a malformed body. Returns a new reference. */
static PyObject *module_cql_parse_result(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer body;
    if (PyObject_GetBuffer(arg, &body, PyBUF_SIMPLE) < 0)
        return NULL;
    bw_cql_result r;
    char err[200];
    PyObject *d = NULL;
    if (bw_cql_result_parse(body.buf, (size_t)body.len, &r, err, sizeof err) < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        PyBuffer_Release(&body);
        return NULL;
    }
    PyObject *a = NULL, *b = NULL, *c = NULL;
    switch (r.kind) {
    case BW_CQL_RESULT_VOID:
        d = Py_BuildValue("{s:s}", "kind", "void");
        break;
    case BW_CQL_RESULT_ROWS:
        if ((a = columns_list(&r.metadata)) != NULL && (b = rows_list(&r)) != NULL)
            d = Py_BuildValue("{s:s,s:O,s:O,s:y#}", "kind", "rows", "columns", a, "rows", b,
                              "paging_state", r.metadata.paging_state ? (const char *)
                              r.metadata.paging_state : "",
                              (Py_ssize_t)(r.metadata.paging_state ? r.metadata.paging_state_len
                                                                   : 0));
        break;
    case BW_CQL_RESULT_SET_KEYSPACE:
        d = Py_BuildValue("{s:s,s:s#}", "kind", "set_keyspace", "keyspace", r.keyspace,
                          (Py_ssize_t)r.keyspace_len);
        break;
    case BW_CQL_RESULT_PREPARED:
        if ((a = columns_list(&r.bind)) != NULL && (b = columns_list(&r.metadata)) != NULL &&
            (c = PyList_New(0)) != NULL) {
            int ok = 1;
            for (int32_t i = 0; ok && i < r.bind.pk_count; i++) {
                PyObject *v = PyLong_FromLong(r.bind.pk_indexes[i]);
                ok = v != NULL && PyList_Append(c, v) == 0;
                Py_XDECREF(v);
            }
            if (ok)
                d = Py_BuildValue("{s:s,s:y#,s:O,s:O,s:O}", "kind", "prepared", "id",
                                  (const char *)r.id, (Py_ssize_t)r.id_len, "columns", a,
                                  "pk_indexes", c, "result_columns", b);
        }
        break;
    default: {
        PyObject *args = PyList_New(0);
        bw_cql_cursor ac = r.args;
        for (uint16_t i = 0; args != NULL && i < r.arg_count; i++) {
            const char *s;
            size_t n;
            bw_cql_get_string(&ac, &s, &n); /* checked by the parser */
            PyObject *v = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
            if (v == NULL || PyList_Append(args, v) < 0)
                Py_CLEAR(args);
            Py_XDECREF(v);
        }
        if (args != NULL)
            d = Py_BuildValue("{s:s,s:s#,s:s#,s:s#,s:s#,s:N}", "kind", "schema_change",
                              "change", r.change, (Py_ssize_t)r.change_len, "target", r.target,
                              (Py_ssize_t)r.target_len, "keyspace", r.keyspace,
                              (Py_ssize_t)r.keyspace_len, "name", r.name ? r.name : "",
                              (Py_ssize_t)r.name_len, "args", args);
        break;
    }
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    bw_cql_result_free(&r);
    PyBuffer_Release(&body);
    return d;
}

/* ---------------------------------------------------------------- QUERY and PREPARE */

/* cql_query_body(query, consistency, *, page_size=0, paging_state=None) -> bytes: a QUERY
   body without values (protocol v4). Returns a new reference. */
static PyObject *module_cql_query_body(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"query", "consistency", "page_size", "paging_state", NULL};
    const char *query;
    Py_ssize_t n;
    int consistency, page_size = 0;
    PyObject *paging = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#i|$iO:cql_query_body", kwlist, &query, &n,
                                     &consistency, &page_size, &paging))
        return NULL;
    if (consistency < 0 || consistency > 0xffff || page_size < 0) {
        PyErr_SetString(PyExc_ValueError, "consistency is 0 to 65535, page_size not negative");
        return NULL;
    }
    Py_buffer state = {0};
    if (paging != Py_None && PyObject_GetBuffer(paging, &state, PyBUF_SIMPLE) < 0)
        return NULL;
    bw_cql_params p = {.consistency = (uint16_t)consistency, .page_size = page_size,
                       .paging_state = paging != Py_None ? state.buf : NULL,
                       .paging_state_len = (size_t)state.len};
    bw_buf out = {0};
    PyObject *result = written_bytes(bw_cql_put_query(&out, query, (size_t)n, &p), &out);
    if (paging != Py_None)
        PyBuffer_Release(&state);
    return result;
}

/* cql_prepare_body(query) -> bytes: a PREPARE body (protocol v4). Returns a new reference. */
static PyObject *module_cql_prepare_body(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n;
    const char *query = str_arg(arg, &n, "the query");
    if (query == NULL)
        return NULL;
    bw_buf out = {0};
    return written_bytes(bw_cql_put_prepare(&out, query, (size_t)n), &out);
}

static PyMethodDef cql_functions[] = {
    {"cql_execute_bodies", (PyCFunction)(void (*)(void))module_cql_execute_bodies,
     METH_VARARGS | METH_KEYWORDS,
     "cql_execute_bodies(batch, prepared_id, names, types, pk_indexes, consistency, *, "
     "first_row=0, serial_consistency=0, timestamp=None, unset=None) -> (bytearray bodies, "
     "bytes ends, bytes tokens or None)\n\nEvery row of an Arrow batch as an EXECUTE body "
     "(protocol v4) of the prepared statement, with its partition token (native int64 arrays)."},
    {"cql_check_schema", module_cql_check_schema, METH_VARARGS,
     "cql_check_schema(schema, names, types): raises SchemaMismatchError naming the first "
     "column whose Arrow type cannot be bound to its CQL type."},
    {"cql_partition_token", module_cql_partition_token, METH_O,
     "cql_partition_token(components) -> int: the Murmur3Partitioner token of a partition "
     "key from its components' serialized values."},
    {"cql_murmur3_hash", module_cql_murmur3_hash, METH_O,
     "cql_murmur3_hash(key) -> int: Murmur3Partitioner's hash of the bytes, before the "
     "minimum long is mapped to the maximum."},
    {"cql_query_body", (PyCFunction)(void (*)(void))module_cql_query_body,
     METH_VARARGS | METH_KEYWORDS,
     "cql_query_body(query, consistency, *, page_size=0, paging_state=None) -> bytes: a "
     "QUERY body without values (protocol v4)."},
    {"cql_prepare_body", module_cql_prepare_body, METH_O,
     "cql_prepare_body(query) -> bytes: a PREPARE body (protocol v4)."},
    {"cql_parse_result", module_cql_parse_result, METH_O,
     "cql_parse_result(body) -> dict: a RESULT body (protocol v4) read with every length "
     "checked; ValueError when malformed."},
    {"cql_type_text", module_cql_type_text, METH_O,
     "cql_type_text(text) -> str: a CQL type's text in canonical form."},
    {NULL, NULL, 0, NULL},
};

int bw_cql_add_to_module(PyObject *module) {
    return PyModule_AddFunctions(module, cql_functions);
}
