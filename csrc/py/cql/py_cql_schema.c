/* The bound columns of a prepared statement (py_cql_rooms.h): its names and CQL types read
   and checked against an Arrow schema, every column bindable to its CQL type (vectors by
   VectorCodec's row writer); cql_check_schema. Core: cql_statement.c. */
#include "py_cql_rooms.h"

#include "py_encode_vector.h"
#include "py_state.h"

#include <string.h>

void bw_cql_bound_free(bound_columns *b) {
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
void bw_cql_raise_with(bw_error_kind kind, PyObject *args) {
    if (args != NULL)
        bw_raise(kind, args, NULL);
    Py_XDECREF(args);
}

/* Raises bulkwire.errors.SchemaMismatchError(message, column, arrow_type, cql_type). */
static void schema_mismatch(const char *message, const char *column, const char *arrow_type,
                            const char *cql_type) {
    bw_cql_raise_with(BW_ERROR_SCHEMA_MISMATCH,
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
int64_t bw_cql_child_named(const struct ArrowSchema *schema, const char *name) {
    for (int64_t i = 0; schema->children != NULL && i < schema->n_children; i++)
        if (schema->children[i] != NULL && schema->children[i]->name != NULL &&
            strcmp(schema->children[i]->name, name) == 0)
            return i;
    return -1;
}

/* Reads names (a sequence of str), types (CQL text each) and pk_indexes, and checks the
   record batch schema against them: every name a column of the schema, each Arrow type
   bindable to its CQL type. 0, or -1 with an exception (SchemaMismatchError for a column). */
int bw_cql_bound_plan(bound_columns *b, const struct ArrowSchema *schema, PyObject *names,
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
        int64_t c = bw_cql_child_named(schema, b->names[i]);
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
        bw_cql_bound_free(b);
    return rc;
}

/* cql_check_schema(schema, names, types) -> None. Raises SchemaMismatchError naming the
   first column whose Arrow type cannot be bound. Returns a new reference (None). */
PyObject *bw_cql_check_schema(PyObject *self, PyObject *args) {
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
        if (none != NULL && bw_cql_bound_plan(&b, schema, names, types, none) == 0) {
            bw_cql_bound_free(&b);
            result = Py_NewRef(Py_None);
        }
        Py_XDECREF(none);
    }
    Py_DECREF(capsule);
    return result;
}
