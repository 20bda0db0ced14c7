/* bulkwire._core's module state: the exception classes the binding raises and the module's
   heap types, each made by PyType_FromModuleAndSpec when the module is executed. Any C
   function reaches the state of this interpreter's module through the interpreter's own
   dict (PyInterpreterState_GetDict), so no class or type is a C global. */
#ifndef BW_PY_STATE_H
#define BW_PY_STATE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_errors.h"

/* The module's heap types. */
typedef enum {
    BW_TYPE_CQL_CANCEL,
    BW_TYPE_CQL_CONNECTION,
    BW_TYPE_CQL_RING,
    BW_TYPE_TLS_CONTEXT,
    BW_TYPE_TLS_CONNECTION,
    BW_TYPE_ZSTD_DECODER,
    BW_TYPE_VECTOR_ROWS,
    BW_TYPE_PREPARED_BATCH,
    BW_TYPE_PIECE,
    BW_TYPE_GZIP_STREAM,
    BW_TYPE_ZSTD_STREAM,
    BW_TYPE_HANDOVER_QUEUE,
    BW_TYPE_COMMAND_WRITER,
    BW_TYPE_ENCODER,
    BW_TYPE_ENTITY_CONVENTIONS,
    BW_TYPE_VECTOR_CODEC,
    BW_TYPE_PUMP_RESULT, /* a struct sequence (PyStructSequence_NewType) */
    BW_TYPES
} bw_type_id;

typedef struct {
    bw_errors_state errors; /* first: py_errors.c's part */
    PyTypeObject *types[BW_TYPES];
} bw_module_state;

/* Records module as this interpreter's bulkwire._core (a strong reference in the
   interpreter's dict, dropped with it). 0, or -1 with an exception set. */
int bw_state_register(PyObject *module);

/* Borrowed: the state of this interpreter's bulkwire._core, or NULL with RuntimeError (not
   made yet, or torn down). */
bw_module_state *bw_state(void);

/* Borrowed: the heap type id, or NULL with an exception set. */
PyTypeObject *bw_state_type(bw_type_id id);

/* Borrowed: makes the heap type of spec for module and keeps it in the state as id; NULL
   with an exception set. */
PyTypeObject *bw_state_make_type(PyObject *module, bw_type_id id, PyType_Spec *spec);

/* Keeps type (a new reference, taken) in the state as id and adds it to module as name.
   0, or -1 with an exception set (type released). */
int bw_state_keep_type(PyObject *module, bw_type_id id, PyTypeObject *type, const char *name);

/* bw_state_make_type, and adds the type to module as X (spec's name: "bulkwire._core.X").
   0, or -1 with an exception. */
int bw_state_add_type(PyObject *module, bw_type_id id, PyType_Spec *spec);

/* The end of a heap type instance's tp_dealloc (after PyObject_GC_UnTrack and its own
   cleanup): frees it and drops its reference to its type (a subclass's too). */
void bw_heap_free(PyObject *self);

/* tp_traverse of a heap type whose instances hold no other reference: visits the type. */
int bw_heap_traverse_type(PyObject *self, visitproc visit, void *arg);

/* The module's traverse, clear and free of the state's references. */
int bw_state_traverse(PyObject *module, visitproc visit, void *arg);
int bw_state_clear(PyObject *module);
#endif
