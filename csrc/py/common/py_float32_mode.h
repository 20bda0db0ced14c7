/* The float32 option of every JSON writer (dumps/Encoder, VectorCodec.to_json_many,
   encode_batch): "widen" or "shortest" (json_array.h says what each writes). Binding layer. */
#ifndef BW_PY_FLOAT32_MODE_H
#define BW_PY_FLOAT32_MODE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A PyArg "O&" converter: sets *(int *)shortest to 0 for "widen", 1 for "shortest".
   1, or 0 with ValueError for any other value. */
int bw_float32_mode_converter(PyObject *value, void *shortest);

/* New reference: the option's values, ("widen", "shortest") (FLOAT32_MODES), or NULL. */
PyObject *bw_float32_modes(void);

/* The option's value for a flag set by the converter: a new reference, or NULL. */
PyObject *bw_float32_mode_name(int shortest);
#endif
