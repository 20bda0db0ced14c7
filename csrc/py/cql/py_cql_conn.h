/* CqlConnection: one CQL native protocol connection (csrc/core/cql/cql_conn.c), driven with the
   GIL released: a request answered, and a pipelined run of request bodies. */
#ifndef BW_PY_CQL_CONN_H
#define BW_PY_CQL_CONN_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds CqlConnection and the CQL_* opcode numbers. 0, or -1 with an exception set. */
int bw_cql_conn_add_to_module(PyObject *module);
#endif
