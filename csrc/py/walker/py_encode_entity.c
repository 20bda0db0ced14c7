/* The entity conventions (the built-in default hook), each rule in one place, in order. */
#include "py_encoder.h"

#include <datetime.h>

#include "datetime_text.h"
#include "int_text.h"

static PyObject *enum_base;      /* enum.Enum */
static PyObject *name_value;     /* "value" */
static PyObject *name_to_json;   /* "to_json" */
static PyObject *name_dict;      /* "__dict__" */
static PyObject *name_metadata;  /* "metadata" */
static PyObject *client_metadata_module; /* "ravendb.json.metadata_as_dictionary" */
static PyObject *client_metadata_class;  /* its MetadataAsDictionary, once that module is loaded */

int bw_entity_init(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return -1;
    PyObject *enum_module = PyImport_ImportModule("enum");
    if (enum_module == NULL)
        return -1;
    enum_base = PyObject_GetAttrString(enum_module, "Enum");
    Py_DECREF(enum_module);
    if (enum_base == NULL)
        return -1;
    name_value = PyUnicode_InternFromString("value");
    name_to_json = PyUnicode_InternFromString("to_json");
    name_dict = PyUnicode_InternFromString("__dict__");
    name_metadata = PyUnicode_InternFromString("metadata");
    client_metadata_module = PyUnicode_InternFromString("ravendb.json.metadata_as_dictionary");
    if (name_value == NULL || name_to_json == NULL || name_dict == NULL || name_metadata == NULL ||
        client_metadata_module == NULL)
        return -1;
    return 0;
}

/* A MetadataAsDictionary's members hold a reference to the parent dictionary, so walking
   its __dict__ meets a cycle; the client's conventions write its `metadata` instead, and so
   do these. No instance can exist before its module is imported: the module is looked up
   among the loaded ones, never imported (bulkwire does not depend on the client), and the
   class is kept once found. */
int bw_entity_is_client_metadata(PyObject *obj) {
    if (client_metadata_class == NULL) {
        PyObject *module = PyImport_GetModule(client_metadata_module);
        if (module == NULL)
            return PyErr_Occurred() ? -1 : 0;
        PyObject *cls = PyObject_GetAttrString(module, "MetadataAsDictionary");
        Py_DECREF(module);
        if (cls == NULL || !PyType_Check(cls)) {
            Py_XDECREF(cls);
            if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
            return 0;
        }
        client_metadata_class = cls;
    }
    return PyObject_TypeCheck(obj, (PyTypeObject *)client_metadata_class);
}

/* datetime_text.h's text of the wall clock; tzinfo only decides whether it is naive. */
static int write_datetime(bw_buf *out, PyObject *dt) {
    bw_civil_time t = {
        .year = PyDateTime_GET_YEAR(dt), .month = PyDateTime_GET_MONTH(dt),
        .day = PyDateTime_GET_DAY(dt), .hour = PyDateTime_DATE_GET_HOUR(dt),
        .minute = PyDateTime_DATE_GET_MINUTE(dt), .second = PyDateTime_DATE_GET_SECOND(dt),
        .microsecond = PyDateTime_DATE_GET_MICROSECOND(dt)};
    int naive = !((_PyDateTime_BaseTZInfo *)dt)->hastzinfo;
    if (bw_buf_reserve(out, BW_DATETIME_TEXT_MAX) < 0)
        return bw_out_of_memory();
    out->len += bw_datetime_text(&t, naive, bw_buf_tail(out));
    return 0;
}

/* [d.]hh:mm:ss[.ffffff]: days only when positive, microseconds only when non-zero. A
   negative span keeps Python's normalisation (days < 0, 0 <= seconds < 86400), so -1 s is
   "23:59:59": the conventions drop the negative day count. */
static int write_timedelta(bw_buf *out, PyObject *delta) {
    int days = PyDateTime_DELTA_GET_DAYS(delta);
    int seconds = PyDateTime_DELTA_GET_SECONDS(delta);
    int micro = PyDateTime_DELTA_GET_MICROSECONDS(delta);
    if (bw_buf_reserve(out, 48) < 0)
        return bw_out_of_memory();
    char *p = bw_buf_tail(out);
    char *start = p;
    *p++ = '"';
    if (days > 0) {
        p += bw_u64_to_text((uint64_t)days, p);
        *p++ = '.';
    }
    bw_u32_to_fixed((uint32_t)(seconds / 3600), 2, p), p += 2;
    *p++ = ':';
    bw_u32_to_fixed((uint32_t)(seconds / 60 % 60), 2, p), p += 2;
    *p++ = ':';
    bw_u32_to_fixed((uint32_t)(seconds % 60), 2, p), p += 2;
    if (micro > 0) {
        *p++ = '.';
        bw_u32_to_fixed((uint32_t)micro, 6, p), p += 6;
    }
    *p++ = '"';
    out->len += (size_t)(p - start);
    return 0;
}

/* Walks what a rule produced and drops it. */
static int walk_and_release(bw_walker *w, PyObject *produced) {
    if (produced == NULL)
        return -1;
    int rc = bw_walk(w, produced);
    Py_DECREF(produced);
    return rc;
}

/* getattr(obj, name, None) that lets every error but AttributeError through.
   New reference, or NULL with no exception (absent) or with one (failure).
   Most entities have no to_json: the lookup without an AttributeError spares building (and
   formatting the message of) an exception object per entity. */
static PyObject *optional_attr(PyObject *obj, PyObject *name) {
    PyObject *attr = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    (void)PyObject_GetOptionalAttr(obj, name, &attr);
#else
    (void)_PyObject_LookupAttr(obj, name, &attr);
#endif
    return attr;
}

/* A set becomes a list in iteration order. */
static int write_set(bw_walker *w, PyObject *set) {
    PyObject *items = PySequence_List(set); /* new reference */
    return walk_and_release(w, items);
}

int bw_entity_encode(bw_walker *w, PyObject *obj) {
    if (PyDateTime_Check(obj))
        return write_datetime(w->out, obj);
    if (PyDelta_Check(obj))
        return write_timedelta(w->out, obj);
    if (PyType_IsSubtype(Py_TYPE(obj), (PyTypeObject *)enum_base))
        return walk_and_release(w, PyObject_GetAttr(obj, name_value));
    int client_metadata = bw_entity_is_client_metadata(obj);
    if (client_metadata != 0)
        return client_metadata < 0 ? -1 : walk_and_release(w, PyObject_GetAttr(obj, name_metadata));

    /* Exact ndarrays and NumPy scalars have neither to_json nor __dict__, so taking them
       before those (slow, failing) lookups changes nothing but the time. */
    int handled = bw_numpy_encode(w, obj, 1);
    if (handled != 0)
        return handled < 0 ? -1 : 0;

    PyObject *to_json = optional_attr(obj, name_to_json);
    if (to_json == NULL && PyErr_Occurred())
        return -1;
    if (to_json != NULL) {
        if (PyCallable_Check(to_json)) {
            PyObject *converted = PyObject_CallNoArgs(to_json);
            Py_DECREF(to_json);
            return walk_and_release(w, converted);
        }
        Py_DECREF(to_json);
    }

    PyObject *attrs = optional_attr(obj, name_dict);
    if (attrs == NULL && PyErr_Occurred())
        return -1;
    if (attrs != NULL) {
        int non_empty = PyObject_IsTrue(attrs);
        if (non_empty != 0)
            return non_empty < 0 ? (Py_DECREF(attrs), -1) : walk_and_release(w, attrs);
        Py_DECREF(attrs);
    }

    if (PySet_Check(obj))
        return write_set(w, obj);

    handled = bw_numpy_encode(w, obj, 0);
    if (handled != 0)
        return handled < 0 ? -1 : 0;

    PyErr_Format(PyExc_TypeError,
                 "%R is not JSON serializable (Try add a json default method to convention "
                 "or try to add methods - to_json & classmethod from_json - to object class)",
                 obj);
    return -1;
}
