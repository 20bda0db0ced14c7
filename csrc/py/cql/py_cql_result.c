/* cql_parse_result: a RESULT body (protocol v4) read with every length checked, as a dict
   (core: cql_result.c). */
#include "py_cql_rooms.h"

#include "cql_result.h"

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
PyObject *bw_cql_parse_result(PyObject *self, PyObject *arg) {
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
