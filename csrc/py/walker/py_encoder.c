/* Binding: the Encoder type, bulkwire.ENTITY and the one-shot dumps(). */
#include "py_encoder.h"

#include <stddef.h>

#include "py_float32_mode.h"
#include "py_out_bytes.h"
#include "py_state.h"

/* ---- ENTITY: the sentinel that selects the built-in entity conventions ---- */

static PyObject *EntityConventions_repr(PyObject *self) {
    (void)self;
    return PyUnicode_FromString("bulkwire.ENTITY");
}

static void EntityConventions_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    bw_heap_free(self);
}

static PyType_Slot EntityConventions_slots[] = {
    {Py_tp_doc, "The built-in default hook: datetime, timedelta, Enum, to_json, __dict__, "
                "set, NumPy."},
    {Py_tp_repr, EntityConventions_repr},
    {Py_tp_dealloc, EntityConventions_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {0, NULL},
};

/* One instance, ENTITY: the type cannot be called (nor is it a name of the module). */
static PyType_Spec EntityConventions_spec = {
    .name = "bulkwire._core.EntityConventions",
    .basicsize = sizeof(PyObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = EntityConventions_slots,
};

static PyObject *entity_singleton; /* created at init, lives as long as the process */

PyObject *bw_entity_sentinel(void) { return entity_singleton; }

/* ---- option parsing shared by Encoder() and dumps() ---- */

static int parse_options(bw_encode_options *opts, PyObject *default_hook, PyObject *ensure_ascii,
                         PyObject *float32) {
    if (default_hook == NULL || default_hook == bw_entity_sentinel()) {
        opts->hook_kind = BW_HOOK_ENTITY;
        opts->hook = NULL;
    } else if (default_hook == Py_None) {
        opts->hook_kind = BW_HOOK_NONE;
        opts->hook = NULL;
    } else if (PyCallable_Check(default_hook)) {
        opts->hook_kind = BW_HOOK_CALLABLE;
        opts->hook = default_hook;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "default must be None, bulkwire.ENTITY or a callable, not %.100s",
                     Py_TYPE(default_hook)->tp_name);
        return -1;
    }
    opts->ensure_ascii = 1;
    if (ensure_ascii != NULL) {
        if (!PyBool_Check(ensure_ascii)) {
            PyErr_Format(PyExc_TypeError, "ensure_ascii must be True or False, not %.100s",
                         Py_TYPE(ensure_ascii)->tp_name);
            return -1;
        }
        opts->ensure_ascii = ensure_ascii == Py_True;
    }
    opts->float32_shortest = 0;
    if (float32 != NULL && !bw_float32_mode_converter(float32, &opts->float32_shortest))
        return -1;
    return 0;
}

/* One walker and buffer kept between calls saves a malloc and the buffer's regrowth per
   document. Only used by one call at a time: a hook can start another encode (directly or
   from a thread that takes the GIL during the hook), which then gets its own. That is what
   makes an Encoder (options only) safe to share between threads and to re-enter. */
static bw_walker *spare_walker;
static bw_buf spare_buf;
static int spare_in_use;
#define SPARE_BUF_KEEP (1u << 20) /* a larger buffer is returned to the allocator */

/* New reference: the JSON bytes of obj. */
static PyObject *encode_to_bytes(const bw_encode_options *opts, PyObject *obj) {
    bw_walker *walker;
    bw_buf local_buf, *out;
    int use_spare = !spare_in_use;
    PyObject *result = NULL;
    if (use_spare) {
        if (spare_walker == NULL && (spare_walker = bw_walker_new()) == NULL)
            return NULL;
        if (spare_buf.data == NULL && bw_buf_init(&spare_buf, 4096) < 0)
            return PyErr_NoMemory();
        spare_in_use = 1;
        walker = spare_walker;
        out = &spare_buf;
        out->len = 0;
    } else {
        /* the walker's open-container stack is large; keep it off the C stack */
        walker = bw_walker_new();
        if (walker == NULL)
            return NULL;
        if (bw_buf_init(&local_buf, 1024) < 0) {
            bw_walker_free(walker);
            return PyErr_NoMemory();
        }
        out = &local_buf;
    }
    bw_walker_init(walker, opts, out);
    bw_out_bytes_begin(out);
    if (bw_walk(walker, obj) == 0)
        result = bw_out_bytes_finish(out);
    else
        bw_out_bytes_abandon(out);
    if (use_spare) {
        if (spare_buf.cap > SPARE_BUF_KEEP)
            bw_buf_free(&spare_buf);
        spare_in_use = 0;
    } else {
        bw_buf_free(&local_buf);
        bw_walker_free(walker);
    }
    return result;
}

/* ---- Encoder ---- */

typedef struct {
    PyObject_HEAD
    bw_encode_options opts;
    PyObject *default_hook; /* what the user passed (None, ENTITY or a callable) */
} EncoderObject;

static PyObject *Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"default", "ensure_ascii", "float32", NULL};
    PyObject *default_hook = bw_entity_sentinel(), *ensure_ascii = NULL, *float32 = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOO:Encoder", keywords, &default_hook,
                                     &ensure_ascii, &float32))
        return NULL;
    bw_encode_options opts;
    if (parse_options(&opts, default_hook, ensure_ascii, float32) < 0)
        return NULL;
    EncoderObject *self = (EncoderObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->opts = opts;
    self->default_hook = Py_NewRef(default_hook);
    return (PyObject *)self;
}

static int Encoder_traverse(EncoderObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self)); /* a heap type */
    Py_VISIT(self->default_hook);
    return 0;
}

static int Encoder_clear(EncoderObject *self) {
    Py_CLEAR(self->default_hook);
    self->opts.hook = NULL;
    self->opts.hook_kind = BW_HOOK_NONE;
    return 0;
}

static void Encoder_dealloc(EncoderObject *self) {
    PyObject_GC_UnTrack(self);
    Encoder_clear(self);
    bw_heap_free((PyObject *)self); /* a subclass's too: the base of a heap type frees */
}

static PyObject *Encoder_encode(EncoderObject *self, PyObject *obj) {
    return encode_to_bytes(&self->opts, obj);
}

static PyObject *Encoder_get_default(EncoderObject *self, void *closure) {
    (void)closure;
    return Py_NewRef(self->default_hook ? self->default_hook : Py_None);
}

static PyObject *Encoder_get_ensure_ascii(EncoderObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->opts.ensure_ascii);
}

static PyObject *Encoder_get_float32(EncoderObject *self, void *closure) {
    (void)closure;
    return bw_float32_mode_name(self->opts.float32_shortest);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)Encoder_encode, METH_O,
     "encode(obj) -> bytes\n\nThe JSON bytes of obj under this encoder's options."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Encoder_getset[] = {
    {"default", (getter)Encoder_get_default, NULL, "The default hook.", NULL},
    {"ensure_ascii", (getter)Encoder_get_ensure_ascii, NULL, "Escape non-ASCII text.", NULL},
    {"float32", (getter)Encoder_get_float32, NULL, "'widen' or 'shortest'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Encoder_slots[] = {
    {Py_tp_doc, "Encoder(*, default=ENTITY, ensure_ascii=True, float32='widen')\n\n"
                "Holds JSON encoding options; encode(obj) returns bytes. Each call has its own\n"
                "state: one Encoder may be shared by threads and called from a hook."},
    {Py_tp_new, Encoder_new},
    {Py_tp_dealloc, Encoder_dealloc},
    {Py_tp_traverse, Encoder_traverse},
    {Py_tp_clear, Encoder_clear},
    {Py_tp_methods, Encoder_methods},
    {Py_tp_getset, Encoder_getset},
    {0, NULL},
};

static PyType_Spec Encoder_spec = {
    .name = "bulkwire._core.Encoder",
    .basicsize = sizeof(EncoderObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Encoder_slots,
};

/* The options of a call that passes no keyword: parse_options(NULL, NULL, NULL) gives the same. */
static const bw_encode_options default_options = {
    .hook_kind = BW_HOOK_ENTITY, .hook = NULL, .ensure_ascii = 1, .float32_shortest = 0};

/* Keyword names, interned at init: the interpreter interns the names in a call's source, so
   a pointer comparison finds them without comparing text. */
static PyObject *kw_obj, *kw_default, *kw_ensure_ascii, *kw_float32;

/* Which of dumps()'s parameters `name` is: 0 obj, 1 default, 2 ensure_ascii, 3 float32, or
   -1 for none. */
static int dumps_keyword_index(PyObject *name) {
    PyObject *const names[] = {kw_obj, kw_default, kw_ensure_ascii, kw_float32};
    for (int i = 0; i < 4; i++)
        if (name == names[i])
            return i;
    /* a name built at run time (dumps(**{...})) is an equal str at another address */
    for (int i = 0; i < 4; i++)
        if (PyUnicode_Check(name) && PyUnicode_Compare(name, names[i]) == 0)
            return i;
    return -1;
}

/* New reference. dumps(obj, *, default=ENTITY, ensure_ascii=True, float32='widen'), called
   with the vectorcall convention: no argument tuple, no keyword dict, and no option parsing
   at all when no keyword is passed. Errors read as Python words them for a def. */
static PyObject *module_dumps(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    (void)module;
    if (kwnames == NULL && nargs == 1)
        return encode_to_bytes(&default_options, args[0]);
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "dumps() takes 1 positional argument but %zd were given",
                     nargs);
        return NULL;
    }
    PyObject *values[4] = {nargs == 1 ? args[0] : NULL, NULL, NULL, NULL};
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int index = dumps_keyword_index(name);
        if (index < 0) {
            PyErr_Format(PyExc_TypeError, "dumps() got an unexpected keyword argument '%S'",
                         name);
            return NULL;
        }
        if (values[index] != NULL) {
            PyErr_Format(PyExc_TypeError, "dumps() got multiple values for argument '%S'", name);
            return NULL;
        }
        values[index] = args[nargs + i];
    }
    if (values[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "dumps() missing 1 required positional argument: 'obj'");
        return NULL;
    }
    bw_encode_options opts;
    if (parse_options(&opts, values[1], values[2], values[3]) < 0)
        return NULL;
    return encode_to_bytes(&opts, values[0]);
}

PyDoc_STRVAR(dumps_doc,
"dumps(obj, *, default=ENTITY, ensure_ascii=True, float32='widen') -> bytes\n"
"\n"
"Encode ``obj`` to JSON bytes, byte-identical to the round trip\n"
"``json.dumps(json.loads(json.dumps(obj, default=...))).encode()``.\n"
"\n"
"``default`` is ``bulkwire.ENTITY`` (the built-in entity conventions), ``None`` (plain\n"
"json: unknown types raise ``TypeError``) or any callable whose result is walked again.\n"
"``float32`` is ``'widen'`` (a float32 value's double repr, as json.dumps of the\n"
"widened value) or ``'shortest'`` (the shortest digits that read back as that float32).\n"
"\n"
">>> import datetime\n"
">>> dumps({\"at\": datetime.datetime(2024, 5, 1, 12, 0)})\n"
"b'{\"at\": \"2024-05-01T12:00:00.0000000\"}'\n"
">>> dumps([1e16, float(\"nan\")])\n"
"b'[1e+16, NaN]'\n");

static PyMethodDef encoder_functions[] = {
    {"dumps", (PyCFunction)(void (*)(void))module_dumps, METH_FASTCALL | METH_KEYWORDS,
     dumps_doc},
    {NULL, NULL, 0, NULL},
};

int bw_encoder_add_to_module(PyObject *module) {
    PyTypeObject *conventions =
        bw_state_make_type(module, BW_TYPE_ENTITY_CONVENTIONS, &EntityConventions_spec);
    if (conventions == NULL || bw_state_add_type(module, BW_TYPE_ENCODER, &Encoder_spec) < 0)
        return -1;
    if (kw_obj == NULL) {
        kw_obj = PyUnicode_InternFromString("obj");
        kw_default = PyUnicode_InternFromString("default");
        kw_ensure_ascii = PyUnicode_InternFromString("ensure_ascii");
        kw_float32 = PyUnicode_InternFromString("float32");
        if (!kw_obj || !kw_default || !kw_ensure_ascii || !kw_float32)
            return -1;
    }
    if (entity_singleton == NULL) {
        entity_singleton = conventions->tp_alloc(conventions, 0);
        if (entity_singleton == NULL)
            return -1;
    }
    if (PyModule_AddObjectRef(module, "ENTITY", bw_entity_sentinel()) < 0 ||
        PyModule_AddIntConstant(module, "MAX_DEPTH", BW_MAX_DEPTH) < 0)
        return -1;
    PyObject *modes = bw_float32_modes(); /* the float32 option's values, for Python's checks */
    if (modes == NULL)
        return -1;
    int added = PyModule_AddObjectRef(module, "FLOAT32_MODES", modes);
    Py_DECREF(modes);
    if (added < 0)
        return -1;
    return PyModule_AddFunctions(module, encoder_functions);
}
