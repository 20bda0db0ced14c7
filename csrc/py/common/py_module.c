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

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bulkwire._core",
    .m_doc = "The C core of bulkwire: JSON encoding, CQL vectors, bulk insert buffers.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL)
        return NULL;
    if (bw_errors_add_to_module(module) < 0 || bw_entity_init() < 0 ||
        bw_encoder_add_to_module(module) < 0 ||
        bw_testing_add_to_module(module) < 0 || bw_vectors_add_to_module(module) < 0 ||
        bw_bulk_add_to_module(module) < 0 || bw_encode_batch_add_to_module(module) < 0 ||
        bw_parquet_pages_add_to_module(module) < 0 ||
        bw_file_read_add_to_module(module) < 0 || bw_build_config_add_to_module(module) < 0 ||
        bw_cql_conn_add_to_module(module) < 0 || bw_cql_add_to_module(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
