/* The document conventions of bulk insert (see py_conventions.h). */
#include "py_conventions.h"

#include "document_id.h"
#include "py_encoder.h"

static PyObject *body_excluded_keys; /* ("Id", "@metadata") */
static PyObject *name_get;           /* "get" */
static PyObject *name_update;        /* "update" */
static PyObject *mapping_abc;        /* collections.abc.Mapping, imported on first need */

PyObject *bw_body_excluded_keys(void) { return body_excluded_keys; }

/* Sets `error` with "<name> <message> <type name>" for the type of obj. -1. */
static int raise_with_type_name(PyObject *error, const char *name, const char *message,
                                PyObject *obj) {
    PyObject *type_name = PyType_GetName(Py_TYPE(obj));
    if (type_name == NULL)
        return -1;
    PyErr_Format(error, "%s %s, not %U", name, message, type_name);
    Py_DECREF(type_name);
    return -1;
}

/* The verdict of the one id rule (document_id.h) on a str: 0 with *problem set (a str that
   UTF-8 cannot hold, with a lone surrogate, is BW_ID_NOT_UTF8), or -1 with another
   exception set. */
static int str_id_problem(PyObject *id, bw_id_problem *problem) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(id, &n);
    if (s == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        *problem = BW_ID_NOT_UTF8;
        return 0;
    }
    /* what Python encodes is valid UTF-8 (or fails, above) */
    *problem = bw_document_id_check_valid_utf8(NULL, 0, s, (size_t)n);
    return 0;
}

int bw_check_id(PyObject *id, const char *name) {
    if (!PyUnicode_Check(id))
        return raise_with_type_name(PyExc_TypeError, name, "must be a str", id);
    bw_id_problem problem;
    if (str_id_problem(id, &problem) < 0)
        return -1;
    if (problem != BW_ID_OK) {
        PyErr_Format(PyExc_ValueError, "%s %s: %R", name, bw_document_id_problem_text(problem), id);
        return -1;
    }
    return 0;
}

/* New reference: getattr(obj, name, None) as Python spells it (only AttributeError is
   swallowed); NULL with another exception set. */
static PyObject *attribute_or_none(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value != NULL)
        return value;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
    return Py_NewRef(Py_None);
}

/* New reference: mapping.get(key), with a dict's own lookup for an exact dict. */
static PyObject *mapping_get(PyObject *mapping, PyObject *key) {
    if (PyDict_CheckExact(mapping)) {
        PyObject *value = PyDict_GetItemWithError(mapping, key);
        if (value == NULL && PyErr_Occurred())
            return NULL;
        return Py_NewRef(value != NULL ? value : Py_None);
    }
    return PyObject_CallMethodOneArg(mapping, name_get, key);
}

/* None stands for "not there": a new reference to it becomes NULL. */
static PyObject *none_as_null(PyObject *value) {
    if (value == Py_None) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

int bw_entity_members(PyObject *entity, bw_walker *plain, int want_id, PyObject **own_metadata,
                      PyObject **own_id, PyObject **members) {
    *own_metadata = *own_id = *members = NULL;
    PyObject *metadata = NULL, *id = NULL, *attrs = NULL;
    if (PyDict_CheckExact(entity)) {
        metadata = mapping_get(entity, bw_entity_names.metadata_key);
        if (metadata == NULL)
            goto error;
        if (want_id && (id = mapping_get(entity, bw_entity_names.id)) == NULL)
            goto error;
    } else {
        int metadata_key = 0; /* whether a plain dict has the key: no lookup when not */
        attrs = plain != NULL ? bw_entity_plain_members(plain, entity, &metadata_key) : NULL;
        if (attrs != NULL) {
            *members = Py_NewRef(attrs);
        } else {
            if (PyErr_Occurred() ||
                (attrs = attribute_or_none(entity, bw_entity_names.dict)) == NULL)
                goto error;
            metadata_key = 1; /* any other __dict__ is asked */
        }
        int has_members = PyObject_IsTrue(attrs);
        if (has_members < 0)
            goto error;
        metadata = has_members && metadata_key ? mapping_get(attrs, bw_entity_names.metadata_key)
                                               : Py_NewRef(Py_None);
        if (metadata == NULL)
            goto error;
        /* no AttributeError made for an absent Id (object's own lookup spares it): its
           allocation could start a collection, whose finalizers could change the members
           fetched for the walk */
        if (want_id && (id = bw_optional_attr(entity, bw_entity_names.id)) == NULL &&
            PyErr_Occurred())
            goto error;
        Py_DECREF(attrs);
    }
    *own_metadata = none_as_null(metadata);
    *own_id = id != NULL ? none_as_null(id) : NULL;
    return 0;
error:
    Py_CLEAR(*members);
    Py_XDECREF(attrs);
    Py_XDECREF(metadata);
    Py_XDECREF(id);
    return -1;
}

/* 1 when obj is a collections.abc.Mapping, 0 when not, -1 with an exception set. */
static int is_mapping(PyObject *obj) {
    if (PyDict_Check(obj))
        return 1;
    if (mapping_abc == NULL) {
        PyObject *abc = PyImport_ImportModule("collections.abc");
        if (abc == NULL)
            return -1;
        mapping_abc = PyObject_GetAttrString(abc, "Mapping");
        Py_DECREF(abc);
        if (mapping_abc == NULL)
            return -1;
    }
    return PyObject_IsInstance(obj, mapping_abc);
}

/* merged.update(extra) after checking extra is a mapping; the official client's
   MetadataAsDictionary stands for the dict it wraps. 0, or -1 with an exception set. */
static int merge_one(PyObject *merged, PyObject *extra, const char *name) {
    int mapping = is_mapping(extra);
    if (mapping < 0)
        return -1;
    if (!mapping) {
        int client_metadata = bw_entity_is_client_metadata(extra);
        if (client_metadata < 0)
            return -1;
        if (!client_metadata)
            return raise_with_type_name(PyExc_TypeError, name, "must be a mapping", extra);
        PyObject *wrapped = PyObject_GetAttr(extra, bw_entity_names.metadata);
        if (wrapped == NULL)
            return -1;
        int rc = PyDict_Check(wrapped) ? PyDict_Update(merged, wrapped)
                                        : raise_with_type_name(PyExc_TypeError, name,
                                                               "must be a mapping", extra);
        Py_DECREF(wrapped);
        return rc;
    }
    if (PyDict_CheckExact(extra))
        return PyDict_Update(merged, extra);
    PyObject *done = PyObject_CallMethodOneArg(merged, name_update, extra);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

PyObject *bw_merge_metadata(PyObject *own, PyObject *metadata, PyObject *defaults) {
    PyObject *merged = PyDict_New();
    if (merged == NULL)
        return NULL;
    if (own != NULL && merge_one(merged, own, "entity's @metadata") < 0)
        goto error;
    if (metadata != NULL && merge_one(merged, metadata, "metadata") < 0)
        goto error;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(defaults, &pos, &key, &value))
        if (PyDict_SetDefault(merged, key, value) == NULL)
            goto error;
    return merged;
error:
    Py_DECREF(merged);
    return NULL;
}

/* check_id(value, name="id") -> value. New reference. */
static PyObject *module_check_id(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *keywords[] = {"value", "name", NULL};
    PyObject *value;
    const char *name = "id";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|s:check_id", keywords, &value, &name))
        return NULL;
    if (bw_check_id(value, name) < 0)
        return NULL;
    return Py_NewRef(value);
}

/* The name of each problem of the id rule, as id_problem() answers it. */
static const struct {
    bw_id_problem problem;
    const char *name;
} id_problem_names[] = {
    {BW_ID_EMPTY, "empty"},
    {BW_ID_BLANK, "blank"},
    {BW_ID_ENDS_WITH_PIPE, "ends_with_pipe"},
    {BW_ID_NOT_UTF8, "not_utf8"},
};

/* id_problem(value) -> None or the problem's name. New reference. */
static PyObject *module_id_problem(PyObject *module, PyObject *value) {
    (void)module;
    if (!PyUnicode_Check(value)) {
        raise_with_type_name(PyExc_TypeError, "id", "must be a str", value);
        return NULL;
    }
    bw_id_problem problem;
    if (str_id_problem(value, &problem) < 0)
        return NULL;
    for (size_t i = 0; i < sizeof id_problem_names / sizeof id_problem_names[0]; i++)
        if (id_problem_names[i].problem == problem)
            return PyUnicode_FromString(id_problem_names[i].name);
    return Py_NewRef(Py_None);
}

/* A new dict {problem name: its words}. */
static PyObject *id_problem_words(void) {
    PyObject *words = PyDict_New();
    if (words == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof id_problem_names / sizeof id_problem_names[0]; i++) {
        PyObject *text = PyUnicode_FromString(bw_document_id_problem_text(id_problem_names[i].problem));
        if (text == NULL || PyDict_SetItemString(words, id_problem_names[i].name, text) < 0) {
            Py_XDECREF(text);
            Py_DECREF(words);
            return NULL;
        }
        Py_DECREF(text);
    }
    return words;
}

/* merge_metadata(own, metadata, defaults) -> dict. New reference. */
static PyObject *module_merge_metadata(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *own, *metadata, *defaults;
    if (!PyArg_ParseTuple(args, "OOO!:merge_metadata", &own, &metadata, &PyDict_Type, &defaults))
        return NULL;
    return bw_merge_metadata(own == Py_None ? NULL : own, metadata == Py_None ? NULL : metadata,
                             defaults);
}

static PyMethodDef conventions_functions[] = {
    {"check_id", (PyCFunction)(void (*)(void))module_check_id, METH_VARARGS | METH_KEYWORDS,
     "check_id(value, name='id') -> value\n\nvalue when it is a valid document id; TypeError or "
     "ValueError naming name otherwise."},
    {"id_problem", module_id_problem, METH_O,
     "id_problem(value) -> str | None\n\nNone when value (a str) is a valid document id, else "
     "the name of its problem, a key of ID_PROBLEMS."},
    {"merge_metadata", module_merge_metadata, METH_VARARGS,
     "merge_metadata(own, metadata, defaults) -> dict\n\nThe @metadata of a document as a new "
     "dict: own, then metadata, then each of defaults (a dict) where not already given."},
    {NULL, NULL, 0, NULL},
};

int bw_conventions_add_to_module(PyObject *module) {
    name_get = PyUnicode_InternFromString("get");
    name_update = PyUnicode_InternFromString("update");
    if (name_get == NULL || name_update == NULL)
        return -1;
    body_excluded_keys = PyTuple_Pack(2, bw_entity_names.id, bw_entity_names.metadata_key);
    if (body_excluded_keys == NULL ||
        PyModule_AddObjectRef(module, "BODY_EXCLUDED_KEYS", body_excluded_keys) < 0)
        return -1;
    PyObject *words = id_problem_words();
    if (words == NULL)
        return -1;
    int added = PyModule_AddObjectRef(module, "ID_PROBLEMS", words);
    Py_DECREF(words);
    if (added < 0)
        return -1;
    return PyModule_AddFunctions(module, conventions_functions);
}
