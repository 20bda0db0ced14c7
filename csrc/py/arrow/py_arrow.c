#include "py_arrow.h"

#include "py_errors.h"

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

/* ------------------------------------------------------------------ exception state */

/* A release callback (or capsule destructor) may run Python: a ctypes or cffi producer's
   does. Run with an exception pending, that Python code fails and the real error is lost
   (SystemError: "returned NULL without setting an exception"). So the exception is set
   aside around every release, and an error the callback itself leaves is reported as
   unraisable: a release has no way to fail. */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *traceback;
#endif
} saved_error;

static void error_set_aside(saved_error *e) {
#if PY_VERSION_HEX >= 0x030C0000
    e->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e->type, &e->value, &e->traceback);
#endif
}

static void error_restore(saved_error *e) {
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->exc);
#else
    PyErr_Restore(e->type, e->value, e->traceback);
#endif
}

#define RELEASE_KEEPING_ERROR(p)                                                               \
    do {                                                                                       \
        if ((p)->release != NULL) {                                                            \
            saved_error saved_;                                                                \
            error_set_aside(&saved_);                                                          \
            (p)->release(p);                                                                   \
            (p)->release = NULL;                                                               \
            error_restore(&saved_);                                                            \
        }                                                                                      \
    } while (0)

void bw_arrow_release_array(struct ArrowArray *a) { RELEASE_KEEPING_ERROR(a); }

static void release_schema(struct ArrowSchema *s) { RELEASE_KEEPING_ERROR(s); }

static void release_stream(struct ArrowArrayStream *s) { RELEASE_KEEPING_ERROR(s); }

/* Drops a reference whose destructor may release Arrow structs, keeping the exception. */
static void decref_keeping_error(PyObject *obj) {
    if (!PyErr_Occurred()) {
        Py_DECREF(obj);
        return;
    }
    saved_error saved;
    error_set_aside(&saved);
    Py_DECREF(obj);
    error_restore(&saved);
}

/* ------------------------------------------------------------------ import */

int bw_arrow_source_check(PyObject *obj) {
    if (intern_names() < 0) {
        PyErr_Clear();
        return 0;
    }
    /* type lookups only: no instance __getattr__ runs, nothing can raise */
    PyTypeObject *tp = Py_TYPE(obj);
    return _PyType_Lookup(tp, name_array) != NULL || _PyType_Lookup(tp, name_stream) != NULL;
}

/* The struct inside a capsule (borrowed: the capsule keeps it until it is moved out). */
static void *capsule_pointer(PyObject *capsule, const char *name) {
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "the Arrow PyCapsule interface returned %.80s, not a "
                     "PyCapsule named '%s'", Py_TYPE(capsule)->tp_name, name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, name); /* raises ValueError on a wrong name */
}

static int open_array(PyObject *method, bw_arrow_source *src) {
    PyObject *pair = PyObject_CallNoArgs(method); /* new reference */
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
        PyErr_SetString(PyExc_ValueError, "the Arrow capsules were already consumed (release "
                        "callback is NULL)");
        goto cleanup;
    }
    src->schema = *schema;
    schema->release = NULL;
    src->array = *array;
    array->release = NULL;
    src->pending = 1;
    rc = 0;
cleanup:
    decref_keeping_error(pair); /* the capsule destructors release what was not moved out */
    return rc;
}

static int stream_error(bw_arrow_source *src, int code, const char *what) {
    const char *msg = src->stream.get_last_error ? src->stream.get_last_error(&src->stream) : NULL;
    bw_raise_format(BW_ERROR_MALFORMED, "Arrow stream %s failed (error %d): %.400s", what,
                    code, msg ? msg : "no message");
    return -1;
}

static int open_stream(PyObject *method, bw_arrow_source *src) {
    PyObject *capsule = PyObject_CallNoArgs(method); /* new reference */
    if (capsule == NULL)
        return -1;
    int rc = -1;
    struct ArrowArrayStream *stream = capsule_pointer(capsule, "arrow_array_stream");
    if (stream == NULL)
        goto cleanup;
    if (stream->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream capsule was already consumed "
                        "(release callback is NULL)");
        goto cleanup;
    }
    src->stream = *stream;
    stream->release = NULL;
    src->is_stream = 1;
    if (src->stream.get_schema == NULL || src->stream.get_next == NULL) {
        bw_raise_format(BW_ERROR_MALFORMED, "malformed Arrow stream: get_schema or get_next is NULL");
        goto fail;
    }
    int code = src->stream.get_schema(&src->stream, &src->schema);
    if (code != 0) {
        src->schema.release = NULL;
        stream_error(src, code, "get_schema");
        goto fail;
    }
    if (src->schema.release == NULL) {
        bw_raise_format(BW_ERROR_MALFORMED, "malformed Arrow stream: get_schema gave a released "
                        "schema");
        goto fail;
    }
    rc = 0;
    goto cleanup;
fail:
    release_schema(&src->schema);
    release_stream(&src->stream);
    src->is_stream = 0;
cleanup:
    decref_keeping_error(capsule);
    return rc;
}

/* The bound method `name` of obj (new reference), NULL with *missing set when obj has no
   such attribute, NULL with an exception for any other failure. */
static PyObject *method_of(PyObject *obj, PyObject *name, int *missing) {
    *missing = 0;
    PyObject *method = PyObject_GetAttr(obj, name);
    if (method == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        *missing = 1;
    }
    return method;
}

int bw_arrow_source_open(PyObject *obj, bw_arrow_source *src) {
    memset(src, 0, sizeof *src);
    if (intern_names() < 0)
        return -1;
    int missing;
    PyObject *method = method_of(obj, name_array, &missing);
    if (method != NULL) {
        int rc = open_array(method, src);
        Py_DECREF(method);
        return rc;
    }
    if (!missing)
        return -1;
    method = method_of(obj, name_stream, &missing);
    if (method != NULL) {
        int rc = open_stream(method, src);
        Py_DECREF(method);
        return rc;
    }
    if (missing)
        PyErr_Format(PyExc_TypeError, "%.80s has neither __arrow_c_array__ nor "
                     "__arrow_c_stream__ (the Arrow PyCapsule interface)", Py_TYPE(obj)->tp_name);
    return -1;
}

static int validate_array(bw_arrow_source *src) {
    char err[320];
    if (bw_arrow_validate(&src->schema, &src->array, err, sizeof err) == 0)
        return 0;
    bw_raise_format(BW_ERROR_MALFORMED, "malformed Arrow data: %s", err);
    return -1;
}

int bw_arrow_source_next(bw_arrow_source *src) {
    if (!src->is_stream) {
        if (src->pending) {
            src->pending = 0;
            return validate_array(src) < 0 ? -1 : 1;
        }
        bw_arrow_release_array(&src->array);
        return 0;
    }
    bw_arrow_release_array(&src->array);
    if (src->stream.release == NULL)
        return 0;
    int code = src->stream.get_next(&src->stream, &src->array);
    if (code != 0) {
        src->array.release = NULL;
        return stream_error(src, code, "get_next");
    }
    if (src->array.release == NULL) /* end of stream */
        return 0;
    return validate_array(src) < 0 ? -1 : 1;
}

void bw_arrow_source_take(bw_arrow_source *src, struct ArrowArray *out) {
    *out = src->array;
    src->array.release = NULL;
}

void bw_arrow_source_close(bw_arrow_source *src) {
    bw_arrow_release_array(&src->array);
    release_schema(&src->schema);
    release_stream(&src->stream);
    src->pending = 0;
}
