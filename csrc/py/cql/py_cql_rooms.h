/* The CQL statements' binding rooms share this, privately: py_cql_schema.c (the bound
   columns: a statement's names and CQL types checked against an Arrow schema, and
   cql_check_schema), py_cql_execute.c (an Arrow batch's rows as EXECUTE bodies and tokens),
   py_cql_result.c (RESULT bodies) and py_cql.c (tokens, type text, QUERY and PREPARE bodies,
   and the module functions' table). */
#ifndef BW_PY_CQL_ROOMS_H
#define BW_PY_CQL_ROOMS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_errors.h"

#include "arrow_c.h"
#include "cql_statement.h"

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

/* Frees what bw_cql_bound_plan made, and zeroes b. */
void bw_cql_bound_free(bound_columns *b);

/* Raises the class of kind (*args); args (a new reference, or NULL when building it failed)
   is released. */
void bw_cql_raise_with(bw_error_kind kind, PyObject *args);

/* The child of struct schema `schema` named `name`, or -1. */
int64_t bw_cql_child_named(const struct ArrowSchema *schema, const char *name);

/* Reads names (a sequence of str), types (CQL text each) and pk_indexes, and checks the
   record batch schema against them: every name a column of the schema, each Arrow type
   bindable to its CQL type. 0 (free it with bw_cql_bound_free), or -1 with an exception
   (SchemaMismatchError for a column). */
int bw_cql_bound_plan(bound_columns *b, const struct ArrowSchema *schema, PyObject *names,
                      PyObject *types, PyObject *pk_indexes);

/* The rooms' module functions, which py_cql.c's table names (each returns a new reference,
   or NULL with an exception set): cql_check_schema (py_cql_schema.c), cql_execute_bodies
   (py_cql_execute.c), cql_parse_result (py_cql_result.c). */
PyObject *bw_cql_check_schema(PyObject *self, PyObject *args);
PyObject *bw_cql_execute_bodies(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *bw_cql_parse_result(PyObject *self, PyObject *arg);
#endif
