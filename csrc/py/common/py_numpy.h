/* Include this instead of numpy/arrayobject.h: every translation unit shares one
   import table (filled by import_array() in py_module.c). */
#ifndef BW_NUMPY_H
#define BW_NUMPY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define PY_ARRAY_UNIQUE_SYMBOL bulkwire_ARRAY_API
#ifndef BW_NUMPY_IMPORT_HERE
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#endif
