/* bulkwire._core: module init. Each part adds its own types and functions.

   The binding layer, csrc/py/: every file is named py_*; it uses the core (csrc/core/, which
   knows no Python and is compiled without Python's headers). Names in the binding: exported
   functions and shared types bw_*; a Python type's object struct XxxObject (bw_* when other
   files share it), its type object XxxType, its slots, methods and getters Xxx_new,
   Xxx_dealloc, Xxx_put, Xxx_get_field; its tables Xxx_methods and Xxx_getset; module-level
   functions module_name, listed in the file's <part>_functions table; every other file-local
   static in lower_snake_case. */
#include "py_encoder.h"
#include "py_errors.h"
#include "py_encode_batch.h"
#include "py_bulk.h"
#include "py_vectors.h"
#include "py_file_read.h"
#include "py_parquet_pages.h"
#include "py_build_config.h"
#include "py_testing.h"
#include "py_cql_conn.h"
#include "py_cql.h"
#include "py_cql_ring.h"
#include "py_cql_shard.h"
#include "py_state.h"

/* Py_mod_exec: every part adds its types and functions to the module, whose state
   (py_state.h) is registered first. 0, or -1 with an exception set. */
static int core_exec(PyObject *module) {
    bw_module_state *state = PyModule_GetState(module);
    if (bw_state_register(module) < 0 || bw_errors_add_to_module(module, &state->errors) < 0 ||
        bw_entity_init() < 0 || bw_encoder_add_to_module(module) < 0 ||
        bw_testing_add_to_module(module) < 0 || bw_vectors_add_to_module(module) < 0 ||
        bw_bulk_add_to_module(module) < 0 || bw_encode_batch_add_to_module(module) < 0 ||
        bw_parquet_pages_add_to_module(module) < 0 ||
        bw_file_read_add_to_module(module) < 0 || bw_build_config_add_to_module(module) < 0 ||
        bw_cql_conn_add_to_module(module) < 0 || bw_cql_add_to_module(module) < 0 ||
        bw_cql_ring_add_to_module(module) < 0 || bw_cql_shard_add_to_module(module) < 0)
        return -1;
    return 0;
}

static void core_free(void *module) {
    bw_state_clear((PyObject *)module);
}

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* static types and C globals (see docs/architecture.md): one interpreter only */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* the code relies on the GIL (docs/architecture.md, "Free-threaded and newer Pythons") */
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bulkwire._core",
    .m_doc = "The C core of bulkwire: JSON encoding, CQL vectors, bulk insert buffers.",
    .m_size = sizeof(bw_module_state),
    .m_slots = core_slots,
    .m_traverse = bw_state_traverse,
    .m_clear = bw_state_clear,
    .m_free = core_free,
};

/* Multi-phase initialisation (PEP 489): the definition; Python makes and executes the
   module. New reference (the definition, as PyModuleDef_Init gives it). */
PyMODINIT_FUNC PyInit__core(void) {
    return PyModuleDef_Init(&core_module);
}
