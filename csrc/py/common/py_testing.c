/* bulkwire._core._testing: the test hooks, a namespace of their own beside the module's API.

   The hooks reach inside the extension (the float text core in bulk, the vint coder, what
   the Arrow import sees, the live memory of pieces, of the buffer pools and of batch text
   written ahead), so they live in this extension, sharing its state; but not in its
   namespace: they are an attribute `_testing` of bulkwire._core, a module object of their
   own, out of _core's API and of its type stub. Tests and benchmarks reach them as `from bulkwire._core import _testing`. */
#include "py_testing.h"

#include "py_errors.h"
#include "py_piece.h"
#include "py_encode_batch.h"
#include "py_float_text.h"
#include "py_parquet_pages.h"
#include "py_vectors.h"

static struct PyModuleDef testing_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bulkwire._core._testing",
    .m_doc = "Test hooks of bulkwire._core, for bulkwire's tests and benchmarks; not part of "
             "its API.",
    .m_size = -1,
};

int bw_testing_add_to_module(PyObject *module) {
    PyObject *testing = PyModule_Create(&testing_module); /* new reference */
    if (testing == NULL)
        return -1;
    int rc = -1;
    if (bw_float_text_add_functions(testing) < 0 || bw_vectors_add_test_hooks(testing) < 0 ||
        bw_piece_add_test_hooks(testing) < 0 || bw_encode_batch_add_test_hooks(testing) < 0 ||
        bw_parquet_pages_add_test_hooks(testing) < 0 || bw_errors_add_test_hooks(testing) < 0)
        goto cleanup;
    rc = PyModule_AddObjectRef(module, "_testing", testing);
cleanup:
    Py_DECREF(testing);
    return rc;
}
