/* See py_state.h. */
#include "py_state.h"

#include <string.h>

/* The key of this interpreter's bulkwire._core in the interpreter's dict. */
#define STATE_KEY "bulkwire._core.state"

int bw_state_register(PyObject *module) {
    PyObject *interp = PyInterpreterState_GetDict(PyInterpreterState_Get()); /* borrowed */
    if (interp == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no interpreter dict for bulkwire._core's state");
        return -1;
    }
    return PyDict_SetItemString(interp, STATE_KEY, module);
}

bw_module_state *bw_state(void) {
    PyObject *interp = PyInterpreterState_GetDict(PyInterpreterState_Get()); /* borrowed */
    PyObject *module = interp != NULL ? PyDict_GetItemString(interp, STATE_KEY) : NULL;
    bw_module_state *state = module != NULL ? PyModule_GetState(module) : NULL;
    if (state == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError,
                        "bulkwire._core's state is not loaded in this interpreter");
    return state;
}

PyTypeObject *bw_state_type(bw_type_id id) {
    bw_module_state *state = bw_state();
    if (state == NULL)
        return NULL;
    if (state->types[id] == NULL)
        PyErr_SetString(PyExc_RuntimeError, "bulkwire._core's types are torn down");
    return state->types[id];
}

PyTypeObject *bw_state_make_type(PyObject *module, bw_type_id id, PyType_Spec *spec) {
    bw_module_state *state = PyModule_GetState(module);
    PyObject *type = PyType_FromModuleAndSpec(module, spec, NULL); /* new reference */
    if (type == NULL)
        return NULL;
    Py_XSETREF(state->types[id], (PyTypeObject *)type); /* the state's reference */
    return state->types[id];
}

int bw_state_keep_type(PyObject *module, bw_type_id id, PyTypeObject *type, const char *name) {
    if (type == NULL)
        return -1;
    bw_module_state *state = PyModule_GetState(module);
    Py_XSETREF(state->types[id], type);
    return PyModule_AddObjectRef(module, name, (PyObject *)type);
}

int bw_state_add_type(PyObject *module, bw_type_id id, PyType_Spec *spec) {
    PyTypeObject *type = bw_state_make_type(module, id, spec); /* borrowed */
    if (type == NULL)
        return -1;
    const char *dot = strrchr(spec->name, '.');
    return PyModule_AddObjectRef(module, dot != NULL ? dot + 1 : spec->name, (PyObject *)type);
}

void bw_heap_free(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

int bw_heap_traverse_type(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    return 0;
}

int bw_state_traverse(PyObject *module, visitproc visit, void *arg) {
    bw_module_state *state = PyModule_GetState(module);
    if (state == NULL)
        return 0;
    for (int id = 0; id < BW_TYPES; id++)
        Py_VISIT(state->types[id]);
    for (int kind = 0; kind < BW_ERROR_KINDS; kind++)
        Py_VISIT(state->errors.classes[kind]);
    return 0;
}

int bw_state_clear(PyObject *module) {
    bw_module_state *state = PyModule_GetState(module);
    if (state == NULL)
        return 0;
    for (int id = 0; id < BW_TYPES; id++)
        Py_CLEAR(state->types[id]);
    for (int kind = 0; kind < BW_ERROR_KINDS; kind++)
        Py_CLEAR(state->errors.classes[kind]);
    return 0;
}
