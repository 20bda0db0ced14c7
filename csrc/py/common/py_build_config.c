/* build_config(): what setup.py's probes found, from the header it generates
   (bw_build_config.h, in the build directory), with each library's run-time version where
   the library can say it. */
#include "py_build_config.h"

#include "bw_build_config.h"
#include "lib_versions.h"

/* build_config() -> new reference: a dict {"flags": str, "libraries": [(name, title, found,
   build_version, runtime_version or None, how, package), ...]}, the libraries in setup.py's
   order, zlib first. */
static PyObject *module_build_config(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *libraries = PyList_New(0), *result = NULL;
    if (libraries == NULL)
        return NULL;
#define BW_BUILD_LIBRARY(name, title, found, version, how, package)                         \
    {                                                                                        \
        const char *runtime = (found) ? bw_runtime_version(name) : NULL;                     \
        PyObject *row = Py_BuildValue("(ssNszss)", name, title, PyBool_FromLong(found),      \
                                      version, runtime, how, package);                       \
        if (row == NULL || PyList_Append(libraries, row) < 0) {                              \
            Py_XDECREF(row);                                                                 \
            goto cleanup;                                                                    \
        }                                                                                    \
        Py_DECREF(row);                                                                      \
    }
    BW_BUILD_LIBRARIES
#undef BW_BUILD_LIBRARY
    result = Py_BuildValue("{s:s,s:O}", "flags", BW_BUILD_FLAGS, "libraries", libraries);
cleanup:
    Py_DECREF(libraries);
    return result;
}

static PyMethodDef build_config_functions[] = {
    {"build_config", module_build_config, METH_NOARGS,
     "build_config(): what the build found: {'flags': str, 'libraries': [(name, title, found, "
     "build_version, runtime_version, how, package), ...]}."},
    {NULL, NULL, 0, NULL},
};

int bw_build_config_add_to_module(PyObject *module) {
    return PyModule_AddFunctions(module, build_config_functions);
}
