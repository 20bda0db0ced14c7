/* The entity conventions (the built-in default hook), each rule in one place, in order. */
#include "py_encoder.h"

#include <datetime.h>

#include "datetime_text.h"
#include "int_text.h"

static PyObject *enum_base;      /* enum.Enum, once the enum module is imported */
static PyObject *name_enum;      /* "enum" */
static PyObject *name_value;     /* "value" */
static PyObject *name_to_json;   /* "to_json" */
static PyObject *client_metadata_module; /* "ravendb.json.metadata_as_dictionary" */
static PyObject *client_metadata_class;  /* its MetadataAsDictionary, once that module is loaded */
bw_entity_name_set bw_entity_names;
static getter instance_dict_getter;      /* the getter of a class's own __dict__ descriptor */

int bw_entity_init(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return -1;
    name_enum = PyUnicode_InternFromString("enum");
    name_value = PyUnicode_InternFromString("value");
    name_to_json = PyUnicode_InternFromString("to_json");
    client_metadata_module = PyUnicode_InternFromString("ravendb.json.metadata_as_dictionary");
    bw_entity_names.id = PyUnicode_InternFromString("Id");
    bw_entity_names.metadata_key = PyUnicode_InternFromString("@metadata");
    bw_entity_names.dict = PyUnicode_InternFromString("__dict__");
    bw_entity_names.metadata = PyUnicode_InternFromString("metadata");
    if (name_enum == NULL || name_value == NULL || name_to_json == NULL ||
        client_metadata_module == NULL || bw_entity_names.id == NULL ||
        bw_entity_names.metadata_key == NULL || bw_entity_names.dict == NULL ||
        bw_entity_names.metadata == NULL)
        return -1;
    /* the __dict__ descriptor every class statement gives its instances, from a class made
       for the purpose: its getter is shared by all of them */
    PyObject *sample = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){}", "sample",
                                             (PyObject *)&PyBaseObject_Type);
    if (sample == NULL)
        return -1;
    PyObject *descr = _PyType_Lookup((PyTypeObject *)sample, bw_entity_names.dict);
    if (descr != NULL && Py_IS_TYPE(descr, &PyGetSetDescr_Type))
        instance_dict_getter = ((PyGetSetDescrObject *)descr)->d_getset->get;
    Py_DECREF(sample);
    return 0;
}

/* Whether t is a subclass of enum.Enum: 1, 0, or -1 with an exception. No Enum member exists
   before the enum module is imported: it is looked up among the loaded modules, never
   imported (importing bulkwire does not import it), and kept once found. */
static int is_enum_type(PyTypeObject *t) {
    if (enum_base == NULL) {
        PyObject *module = PyImport_GetModule(name_enum); /* new reference */
        if (module == NULL || module == Py_None) {
            Py_XDECREF(module);
            return PyErr_Occurred() ? -1 : 0;
        }
        PyObject *cls = PyObject_GetAttrString(module, "Enum"); /* new reference */
        Py_DECREF(module);
        if (cls == NULL)
            return -1;
        if (enum_base == NULL) /* not found meanwhile by code the lookup ran */
            enum_base = cls;
        else
            Py_DECREF(cls);
    }
    return PyType_IsSubtype(t, (PyTypeObject *)enum_base);
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

/* 1 when instances of t are written by the entity conventions as their __dict__ (when it is
   not empty and holds no "to_json") and finding that dict runs no Python code: a class of a
   class statement whose attribute lookup is object's own, whose __dict__ is the one every
   class statement gives, with no class attribute to_json, and no class attribute Id that is
   a descriptor (the conventions read an entity's Id before its walk); not a str, int, float,
   list, tuple, dict, datetime, timedelta, Enum or the client's MetadataAsDictionary (the
   rules before to_json), nor NumPy's (not a class of a class statement). *dict_descr: t's
   __dict__ descriptor (borrowed). 0 when not, -1 with an exception set. */
static int plain_type(PyTypeObject *t, PyObject **dict_descr) {
    unsigned long flags = t->tp_flags;
    if (!(flags & Py_TPFLAGS_HEAPTYPE) || t->tp_getattro != PyObject_GenericGetAttr ||
        instance_dict_getter == NULL ||
        (flags & (Py_TPFLAGS_LONG_SUBCLASS | Py_TPFLAGS_LIST_SUBCLASS | Py_TPFLAGS_TUPLE_SUBCLASS |
                  Py_TPFLAGS_UNICODE_SUBCLASS | Py_TPFLAGS_DICT_SUBCLASS | Py_TPFLAGS_TYPE_SUBCLASS |
                  Py_TPFLAGS_BASE_EXC_SUBCLASS | Py_TPFLAGS_BYTES_SUBCLASS)) ||
        PyType_IsSubtype(t, &PyFloat_Type) || PyType_IsSubtype(t, PyDateTimeAPI->DateTimeType) ||
        PyType_IsSubtype(t, PyDateTimeAPI->DeltaType))
        return 0;
    int is_enum = is_enum_type(t);
    if (is_enum != 0)
        return is_enum < 0 ? -1 : 0;
    /* None is no MetadataAsDictionary: asked only to find the client's class when its
       module is loaded (a class of that module cannot exist before) */
    if (bw_entity_is_client_metadata(Py_None) < 0)
        return -1;
    if (client_metadata_class != NULL && PyType_IsSubtype(t, (PyTypeObject *)client_metadata_class))
        return 0;
    if (_PyType_Lookup(t, name_to_json) != NULL)
        return 0;
    PyObject *id_attr = _PyType_Lookup(t, bw_entity_names.id);
    if (id_attr != NULL && Py_TYPE(id_attr)->tp_descr_get != NULL)
        return 0;
    PyObject *descr = _PyType_Lookup(t, bw_entity_names.dict);
    if (descr == NULL || !Py_IS_TYPE(descr, &PyGetSetDescr_Type) ||
        ((PyGetSetDescrObject *)descr)->d_getset->get != instance_dict_getter)
        return 0;
    *dict_descr = descr;
    return 1;
}

/* Whether key (an exact str) is name (an interned one): the same object, most often. */
static int is_name(PyObject *key, PyObject *name) {
    return key == name || (PyUnicode_GET_LENGTH(key) == PyUnicode_GET_LENGTH(name) &&
                           PyUnicode_Compare(key, name) == 0);
}

/* New reference: the __dict__ of obj when it is a non-empty exact dict whose keys are all
   exact str, none of them "to_json" (so that looking anything up in it runs no code, and an
   instance's own to_json is not missed); NULL without an exception when not. *metadata_key:
   whether "@metadata" is one of the keys. */
static PyObject *plain_dict(PyObject *obj, PyObject *descr, int *metadata_key) {
    PyGetSetDef *getset = ((PyGetSetDescrObject *)descr)->d_getset;
    PyObject *dict = getset->get(obj, getset->closure);
    if (dict == NULL)
        return NULL;
    if (!PyDict_CheckExact(dict) || PyDict_GET_SIZE(dict) == 0)
        goto general;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || is_name(key, name_to_json))
            goto general;
        if (is_name(key, bw_entity_names.metadata_key))
            *metadata_key = 1;
    }
    return dict;
general:
    Py_DECREF(dict);
    return NULL;
}

PyObject *bw_entity_plain_members(bw_walker *w, PyObject *obj, int *metadata_key) {
    int has_metadata = 0;
    if (metadata_key == NULL)
        metadata_key = &has_metadata;
    *metadata_key = 0;
    PyTypeObject *t = Py_TYPE(obj);
    unsigned int version = t->tp_version_tag;
    if (t != w->plain_type || version == 0 || version != w->plain_version) {
        PyObject *descr = NULL;
        int plain = plain_type(t, &descr);
        if (plain <= 0)
            return NULL;
        /* kept when the class kept one version tag throughout (nothing changed it meanwhile) */
        if (version != 0 && t->tp_version_tag == version) {
            w->plain_type = t;
            w->plain_version = version;
            w->plain_dict_descr = descr;
        }
        return plain_dict(obj, descr, metadata_key);
    }
    return plain_dict(obj, w->plain_dict_descr, metadata_key);
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

int bw_entity_is_exact_datetime(PyObject *obj) {
    return PyDateTime_CheckExact(obj);
}

int bw_entity_write_exact_datetime(bw_walker *w, PyObject *obj) {
    if (!PyDateTime_CheckExact(obj) || w->depth >= BW_MAX_DEPTH)
        return 0; /* at the depth limit, write_other raises json's RecursionError */
    if (bw_walker_check_stack(w) < 0)
        return -1;
    return write_datetime(w->out, obj) < 0 ? -1 : 1;
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

/* Most entities have no to_json: the lookup without an AttributeError spares building (and
   formatting the message of) an exception object per entity. */
PyObject *bw_optional_attr(PyObject *obj, PyObject *name) {
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
    PyObject *members = bw_entity_plain_members(w, obj, NULL);
    if (members != NULL)
        return walk_and_release(w, members);
    if (PyErr_Occurred())
        return -1;
    if (PyDateTime_Check(obj))
        return write_datetime(w->out, obj);
    if (PyDelta_Check(obj))
        return write_timedelta(w->out, obj);
    int is_enum = is_enum_type(Py_TYPE(obj));
    if (is_enum != 0)
        return is_enum < 0 ? -1 : walk_and_release(w, PyObject_GetAttr(obj, name_value));
    int client_metadata = bw_entity_is_client_metadata(obj);
    if (client_metadata != 0)
        return client_metadata < 0
                   ? -1
                   : walk_and_release(w, PyObject_GetAttr(obj, bw_entity_names.metadata));

    /* Exact ndarrays and NumPy scalars have neither to_json nor __dict__, so taking them
       before those (slow, failing) lookups changes nothing but the time. */
    int handled = bw_numpy_encode(w, obj, 1);
    if (handled != 0)
        return handled < 0 ? -1 : 0;

    PyObject *to_json = bw_optional_attr(obj, name_to_json);
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

    PyObject *attrs = bw_optional_attr(obj, bw_entity_names.dict);
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
