/* The shard of ScyllaDB tokens, for Python (py_cql_shard.c; core: cql_shard.c). */
#ifndef BW_PY_CQL_SHARD_H
#define BW_PY_CQL_SHARD_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds cql_shards and the shard limits to the module. 0, or -1 with an exception set. */
int bw_cql_shard_add_to_module(PyObject *module);
#endif
