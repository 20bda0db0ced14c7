#include "py_arrow.h"

#include <string.h>

static PyObject *name_array;  /* "__arrow_c_array__", interned, immortal for the module */
static PyObject *name_stream; /* "__arrow_c_stream__" */

static int intern_names(void) {
    if (name_array == NULL && (name_array = PyUnicode_InternFromString("__arrow_c_array__")) == NULL)
        return -1;
    if (name_stream == NULL && (name_stream = PyUnicode_InternFromString("__arrow_c_stream__")) == NULL)
        return -1;
    return 0;
}

int bw_arrow_source_check(PyObject *obj) {
    if (intern_names() < 0) {
        PyErr_Clear();
        return 0;
    }
    /* type lookups only: no instance __getattr__ runs, nothing can raise */
    PyTypeObject *tp = Py_TYPE(obj);
    return _PyType_Lookup(tp, name_array) != NULL || _PyType_Lookup(tp, name_stream) != NULL;
}

/* Moves the struct out of a capsule (which keeps an empty struct its destructor ignores). */
static void *capsule_pointer(PyObject *capsule, const char *name) {
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "the Arrow PyCapsule interface returned %.80s, not a "
                     "PyCapsule named '%s'", Py_TYPE(capsule)->tp_name, name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, name); /* raises ValueError on a wrong name */
}

static int open_array(PyObject *obj, bw_arrow_source *src) {
    PyObject *pair = PyObject_CallMethodNoArgs(obj, name_array); /* new reference */
    if (pair == NULL)
        return -1;
    int rc = -1;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "__arrow_c_array__() must return a tuple "
                        "(schema_capsule, array_capsule)");
        goto cleanup;
    }
    struct ArrowSchema *schema = capsule_pointer(PyTuple_GET_ITEM(pair, 0), "arrow_schema");
    if (schema == NULL)
        goto cleanup;
    struct ArrowArray *array = capsule_pointer(PyTuple_GET_ITEM(pair, 1), "arrow_array");
    if (array == NULL)
        goto cleanup;
    if (schema->release == NULL || array->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Arrow capsules were already consumed");
        goto cleanup;
    }
    src->schema = *schema;
    schema->release = NULL;
    src->array = *array;
    array->release = NULL;
    src->pending = 1;
    rc = 0;
cleanup:
    Py_DECREF(pair); /* the capsule destructors release whatever was not moved out */
    return rc;
}

static int stream_error(bw_arrow_source *src, int code, const char *what) {
    const char *msg = src->stream.get_last_error ? src->stream.get_last_error(&src->stream) : NULL;
    PyErr_Format(PyExc_ValueError, "Arrow stream %s failed (error %d): %.400s", what, code,
                 msg ? msg : "no message");
    return -1;
}

static int open_stream(PyObject *obj, bw_arrow_source *src) {
    PyObject *capsule = PyObject_CallMethodNoArgs(obj, name_stream); /* new reference */
    if (capsule == NULL)
        return -1;
    int rc = -1;
    struct ArrowArrayStream *stream = capsule_pointer(capsule, "arrow_array_stream");
    if (stream == NULL)
        goto cleanup;
    if (stream->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream capsule was already consumed");
        goto cleanup;
    }
    src->stream = *stream;
    stream->release = NULL;
    src->is_stream = 1;
    int code = src->stream.get_schema(&src->stream, &src->schema);
    if (code != 0) {
        stream_error(src, code, "get_schema");
        src->schema.release = NULL;
        bw_arrow_stream_release(&src->stream);
        goto cleanup;
    }
    rc = 0;
cleanup:
    Py_DECREF(capsule);
    return rc;
}

int bw_arrow_source_open(PyObject *obj, bw_arrow_source *src) {
    memset(src, 0, sizeof *src);
    if (intern_names() < 0)
        return -1;
    PyTypeObject *tp = Py_TYPE(obj);
    if (_PyType_Lookup(tp, name_array) != NULL)
        return open_array(obj, src);
    if (_PyType_Lookup(tp, name_stream) != NULL)
        return open_stream(obj, src);
    PyErr_Format(PyExc_TypeError, "%.80s has neither __arrow_c_array__ nor __arrow_c_stream__",
                 tp->tp_name);
    return -1;
}

int bw_arrow_source_next(bw_arrow_source *src) {
    if (!src->is_stream) {
        if (src->pending) {
            src->pending = 0;
            return 1;
        }
        bw_arrow_array_release(&src->array);
        return 0;
    }
    bw_arrow_array_release(&src->array);
    if (src->stream.release == NULL)
        return 0;
    int code = src->stream.get_next(&src->stream, &src->array);
    if (code != 0) {
        src->array.release = NULL;
        return stream_error(src, code, "get_next");
    }
    if (src->array.release == NULL) /* end of stream */
        return 0;
    return 1;
}

void bw_arrow_source_close(bw_arrow_source *src) {
    bw_arrow_array_release(&src->array);
    bw_arrow_schema_release(&src->schema);
    bw_arrow_stream_release(&src->stream);
    src->pending = 0;
}
