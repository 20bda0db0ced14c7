/* The one gate to NumPy's C API (see py_numpy.h): the import table is defined here and
   filled here, the first time a caller needs it. */
#define BW_NUMPY_IMPORT_HERE
#include "py_numpy.h"

/* The modules whose import defines ndarray: NumPy 2's, then NumPy 1's. Interned at first
   use; they live as long as the process. */
static PyObject *core_names[2];

/* 1 when NumPy's core module is in sys.modules (so ndarray may have instances), 0 when not,
   -1 with an exception. Borrowed lookups only. */
static int core_imported(void) {
    static const char *const names[2] = {"numpy._core._multiarray_umath",
                                         "numpy.core._multiarray_umath"};
    PyObject *modules = PyImport_GetModuleDict(); /* borrowed */
    for (int i = 0; i < 2; i++) {
        if (core_names[i] == NULL && (core_names[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
        PyObject *module = PyDict_GetItemWithError(modules, core_names[i]); /* borrowed */
        if (module != NULL && module != Py_None)
            return 1;
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

int bw_numpy_load(int import) {
    if (PyArray_API != NULL)
        return 1;
    if (!import) {
        int imported = core_imported();
        if (imported <= 0)
            return imported;
    }
    /* The GIL is held, but the import below may wait on NumPy's import lock, held by a
       thread still importing it, and let other threads (or a hook, or a finalizer, on this
       thread) reach this point meanwhile. Each such load does the same thing: the table is
       the one pointer of NumPy's capsule, and it is only kept once every check passed, so a
       caller never sees a table that failed its checks. */
    if (_import_array() < 0) {
        PyArray_API = NULL;
        return -1;
    }
    return 1;
}
