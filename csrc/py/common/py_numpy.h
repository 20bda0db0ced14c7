/* Include this instead of numpy/arrayobject.h: every translation unit shares one import
   table, filled the first time it is needed by the one gate below (py_numpy.c), never at
   module import: `import bulkwire` does not import NumPy.

   While NumPy's core is not imported, no object can be an ndarray or a NumPy scalar, so a
   check has nothing to find and asks nothing of NumPy: bw_numpy_imported says so without
   loading anything. Once NumPy is imported (by anyone), the first call loads the C API, once;
   from then on both gates are a test of one pointer. Every use of the NumPy API in the
   extension comes after one of them. */
#ifndef BW_NUMPY_H
#define BW_NUMPY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define PY_ARRAY_UNIQUE_SYMBOL bulkwire_ARRAY_API
#ifndef BW_NUMPY_IMPORT_HERE
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

/* The slow half of the gates: import (1: import NumPy when it is not; 0: only when it is),
   then load the API. 1 loaded, 0 not imported (only with import == 0), -1 with an
   exception. */
int bw_numpy_load(int import);

/* For a check ("is this an ndarray / a NumPy scalar?"): 1 when the API is loaded (the check
   may run), 0 when NumPy is not imported (the answer is no), -1 with an exception (NumPy is
   imported but its C API cannot be used). Never imports NumPy. */
static inline int bw_numpy_imported(void) {
    return PyArray_API != NULL ? 1 : bw_numpy_load(0);
}

/* For code that makes arrays or reads array-likes (lists included): imports NumPy when it
   is not, then loads the API. 0, or -1 with an exception (ImportError without NumPy). */
static inline int bw_numpy_required(void) {
    return PyArray_API != NULL ? 0 : bw_numpy_load(1) < 0 ? -1 : 0;
}

/* PyArray_Check and PyArray_CheckExact through the gate: 1 when obj is an ndarray (or, for
   the first, a subclass), 0 when not (always while NumPy is not imported), -1 with an
   exception. */
static inline int bw_numpy_is_array(PyObject *obj) {
    int imported = bw_numpy_imported();
    return imported <= 0 ? imported : PyArray_Check(obj);
}
static inline int bw_numpy_is_exact_array(PyObject *obj) {
    int imported = bw_numpy_imported();
    return imported <= 0 ? imported : PyArray_CheckExact(obj);
}
#endif
