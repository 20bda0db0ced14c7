/* cql_execute_bodies: every row of an Arrow batch as the body of an EXECUTE of a prepared
   statement, with its partition token, the GIL released over the rows (py_cql_rooms.h: the
   bound columns are py_cql_schema.c's). Core: cql_values.c, cql_statement.c, murmur3.c. */
#include "py_cql_rooms.h"

#include "py_arrow.h"

#include <string.h>

/* Raises bulkwire.errors.RowError for a row the core refused, MemoryError for -1. */
static void raise_row_error(int rc, const bw_cql_row_error *e, const bound_columns *b) {
    if (rc == -1 || e->column < 0) {
        PyErr_NoMemory();
        return;
    }
    bw_cql_raise_with(BW_ERROR_ROW, Py_BuildValue("(sLs)", b->names[e->column],
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

/* The rows refused (an array of bw_cql_row_error in refused_rows) appended to the list
   refused as (row, column, reason) tuples. 0, or -1 with an exception. */
static int list_refused(PyObject *refused, const bw_buf *refused_rows, const bound_columns *b) {
    size_t n = refused_rows->len / sizeof(bw_cql_row_error);
    for (size_t i = 0; i < n; i++) {
        bw_cql_row_error e;
        memcpy(&e, refused_rows->data + i * sizeof e, sizeof e);
        PyObject *item = Py_BuildValue("(Lss)", (long long)e.row, b->names[e.column],
                                       e.reason); /* new */
        if (item == NULL || PyList_Append(refused, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    return 0;
}

/* cql_execute_bodies(batch, prepared_id, names, types, pk_indexes, consistency, *,
   first_row=0, serial_consistency=0, timestamp=None, unset=None, refusing=False) ->
   (bodies, ends, tokens), or with refusing (bodies, ends, tokens, refused).
   Every row of the Arrow record batch / table / stream as the body of an EXECUTE of the
   prepared statement `prepared_id`, binding column names[i] (CQL type types[i]) to bind
   marker i; a null of marker i is written unset (length -2), not null, where byte i of
   unset is not 0. bodies: a bytearray of the bodies back to back; ends: bytes of native
   int64, the end of each row's body in bodies; tokens: bytes of native int64, each row's
   partition token (None when pk_indexes is empty). A row that cannot be written raises
   RowError; with refusing, every row is judged in one pass instead: the rows refused are
   left out of bodies, ends and tokens, and listed in refused as (row, column, reason)
   tuples, in row order, with the column and reason RowError would carry. The GIL is
   released over the rows. Returns a new reference. */

PyObject *bw_cql_execute_bodies(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"batch", "prepared_id", "names", "types", "pk_indexes",
                             "consistency", "first_row", "serial_consistency", "timestamp",
                             "unset", "refusing", NULL};
    PyObject *batch, *names, *types, *pk_indexes, *timestamp = Py_None, *unset = NULL;
    Py_buffer id = {0};
    int consistency, serial = 0, refusing = 0;
    long long first_row = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*OOOi|$LiOOp:cql_execute_bodies", kwlist,
                                     &batch, &id, &names, &types, &pk_indexes, &consistency,
                                     &first_row, &serial, &timestamp, &unset, &refusing))
        return NULL;
    bw_arrow_source src;
    bound_columns b;
    int planned = 0, opened = 0;
    bw_buf out = {0}, ends = {0}, tokens = {0}, refused_rows = {0};
    PyObject *result = NULL, *refused = refusing ? PyList_New(0) : NULL;
    if (refusing && refused == NULL)
        goto cleanup;
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
            if (bw_cql_bound_plan(&b, &src.schema, names, types, pk_indexes) < 0)
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
            int64_t c = bw_cql_child_named(&src.schema, b.names[i]);
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
        int64_t kept = rows;
        refused_rows.len = 0;
        Py_BEGIN_ALLOW_THREADS
        w = refusing ? bw_cql_encode_rows_refusing(&st, rows, row, &out, e, t, &refused_rows,
                                                   &kept, &re)
                     : bw_cql_encode_rows(&st, rows, row, &out, e, t, &re);
        Py_END_ALLOW_THREADS
        if (w < 0) {
            raise_row_error(w, &re, &b);
            goto cleanup;
        }
        if (refusing) { /* the arrays hold the rows kept */
            ends.len -= (size_t)(rows - kept) * 8;
            if (st.n_pk)
                tokens.len -= (size_t)(rows - kept) * 8;
            if (list_refused(refused, &refused_rows, &b) < 0)
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
        if (refusing && result != NULL)
            Py_SETREF(result, Py_BuildValue("(OOOO)", PyTuple_GET_ITEM(result, 0),
                                            PyTuple_GET_ITEM(result, 1),
                                            PyTuple_GET_ITEM(result, 2), refused));
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
            result = refusing ? PyTuple_Pack(4, bodies, ends_b, tok_b, refused)
                              : PyTuple_Pack(3, bodies, ends_b, tok_b);
        Py_XDECREF(bodies);
        Py_XDECREF(ends_b);
        Py_XDECREF(tok_b);
    }
cleanup:
    if (opened)
        bw_arrow_source_close(&src);
    if (planned)
        bw_cql_bound_free(&b);
    bw_buf_free(&out);
    bw_buf_free(&ends);
    bw_buf_free(&tokens);
    bw_buf_free(&refused_rows);
    Py_XDECREF(refused);
    PyBuffer_Release(&id);
    return result;
}
