/* The walker: json's type checks in json's order, writing final bytes in one pass. */
#include "py_encoder.h"

#include "float_text.h"
#include "int_text.h"
#include "json_array.h"
#include "json_string.h"

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#endif

/* ALWAYS_INLINE: kept in its callers (as a call of its own, the float run measured 2%
   slower); NOT_INLINED: a rare path kept out of a hot function's registers. */
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#define NOT_INLINED __attribute__((noinline))
#else
#define ALWAYS_INLINE inline
#define NOT_INLINED
#endif

int bw_out_of_memory(void) {
    PyErr_NoMemory();
    return -1;
}

/* ---- the C stack guard ----
   MAX_DEPTH alone would overflow a thread with a small stack. Before each container or hook
   the walker compares its own frame address with the thread's real stack end plus a margin
   that covers what runs between two checks: a few walker frames and, in a hook, a call into
   Python with the C functions it calls in turn (3.11 does not guard its own C stack). */
#ifdef __has_feature
#define BW_HAS_FEATURE(name) __has_feature(name)
#else
#define BW_HAS_FEATURE(name) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || BW_HAS_FEATURE(address_sanitizer)
#define STACK_MARGIN (64 * 1024) /* the walker's own frames are several times larger */
#else
#define STACK_MARGIN (40 * 1024)
#endif

/* Looked up once per thread: pthread_getattr_np reads /proc/self/maps for the main thread. */
static _Thread_local uintptr_t thread_stack_floor;
static _Thread_local int thread_stack_known;

/* The lowest address of this thread's stack (it grows down), or 0 when it cannot be found. */
static uintptr_t lowest_stack_address(void) {
#if defined(__linux__)
    pthread_attr_t attr;
    void *low = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return 0;
    int rc = pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
    return rc == 0 ? (uintptr_t)low : 0;
#elif defined(__APPLE__)
    pthread_t self = pthread_self();
    return (uintptr_t)pthread_get_stackaddr_np(self) - pthread_get_stacksize_np(self);
#else
    return 0; /* unknown: only MAX_DEPTH applies */
#endif
}

static uintptr_t stack_floor(void) {
    if (!thread_stack_known) {
        uintptr_t low = lowest_stack_address();
        thread_stack_floor = low == 0 ? 0 : low + STACK_MARGIN;
        thread_stack_known = 1;
    }
    return thread_stack_floor;
}

/* The frame address is the real stack even when AddressSanitizer moves locals to a fake
   stack, where a local's address would say nothing about the thread's stack. */
#if defined(__GNUC__) || defined(__clang__)
#define CURRENT_STACK_ADDRESS() ((uintptr_t)__builtin_frame_address(0))
#else
#define CURRENT_STACK_ADDRESS() ((uintptr_t)&w)
#endif

/* Whether the C stack has reached the walker's floor (the test itself, inline in enter). */
static inline int stack_low(const bw_walker *w) {
    return CURRENT_STACK_ADDRESS() < w->stack_floor;
}

int bw_walker_check_stack(const bw_walker *w) {
    if (stack_low(w)) {
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded while encoding a JSON object (the "
                        "thread's C stack is nearly full: nest less, or give the thread a larger "
                        "stack with threading.stack_size())");
        return -1;
    }
    return 0;
}

/* ---- a dict's items in order ----
   PyDict_Next costs a call and about 50 instructions per item; a combined-table dict (every
   dict but an instance's shared-key __dict__) keeps its items in one array, read here in
   place, the way the fastest encoders read it. The layout is CPython's own
   (Include/internal/pycore_dict.h of 3.11 to 3.13): mirrored below, and checked against
   PyDict_Next once per process (check_dict_layout) before it is ever used; any other
   version or a failed check leaves PyDict_Next in charge. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#define BW_DICT_ENTRIES 1
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind; /* 0: general keys, 1: str keys, 2: split (values held apart) */
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[]; /* 1 << dk_log2_index_bytes bytes, then the entries */
} bw_dict_keys;
typedef struct {
    Py_hash_t hash;
    PyObject *key;
    PyObject *value;
} bw_dict_entry; /* general keys */
typedef struct {
    PyObject *key;
    PyObject *value;
} bw_dict_str_entry; /* str keys */
#endif

/* 1: the entries are read in place; 0: through PyDict_Next. Set once, before any walk. */
static int dict_entries_usable;

/* PyDict_Next for an exact dict, with the same positions (an entry's index plus one), so the
   two may take turns on one dict. Borrowed references. No Python code runs. */
static inline int dict_next(PyObject *dict, Py_ssize_t *pos, PyObject **key, PyObject **value) {
#ifdef BW_DICT_ENTRIES
    PyDictObject *mp = (PyDictObject *)dict;
    if (dict_entries_usable && mp->ma_values == NULL) {
        const bw_dict_keys *keys = (const bw_dict_keys *)(const void *)mp->ma_keys;
        const char *entries = keys->dk_indices + ((size_t)1 << keys->dk_log2_index_bytes);
        Py_ssize_t i = *pos, n = keys->dk_nentries;
        if (keys->dk_kind == 1) {
            const bw_dict_str_entry *e = (const bw_dict_str_entry *)(const void *)entries;
            while (i < n && e[i].value == NULL)
                i++;
            if (i >= n)
                return 0;
            *key = e[i].key;
            *value = e[i].value;
        } else if (keys->dk_kind == 0) {
            const bw_dict_entry *e = (const bw_dict_entry *)(const void *)entries;
            while (i < n && e[i].value == NULL)
                i++;
            if (i >= n)
                return 0;
            *key = e[i].key;
            *value = e[i].value;
        } else {
            return PyDict_Next(dict, pos, key, value);
        }
        *pos = i + 1;
        return 1;
    }
#endif
    return PyDict_Next(dict, pos, key, value);
}

/* Whether dict_next gives what PyDict_Next gives, item by item and position by position, for
   dict. 1 yes, 0 no. */
static int dict_next_agrees(PyObject *dict) {
    Py_ssize_t pos = 0, mine = 0;
    PyObject *key, *value, *my_key, *my_value;
    for (;;) {
        int more = PyDict_Next(dict, &pos, &key, &value);
        int my_more = dict_next(dict, &mine, &my_key, &my_value);
        if (more != my_more || pos != mine)
            return 0;
        if (!more)
            return 1;
        if (key != my_key || value != my_value)
            return 0;
    }
}

/* Sets dict_entries_usable once: dict_next is tried on dicts of every kind it reads (str
   keys, general keys, a deleted item's hole, a table grown past its first size) and kept
   only when it agrees with PyDict_Next on each. 0, or -1 with an exception. */
static int check_dict_layout(void) {
    static int checked;
    PyObject *dicts[3] = {NULL, NULL, NULL};
    int rc = -1, agree = 1;
    if (checked)
        return 0;
    for (int d = 0; d < 3; d++)
        if ((dicts[d] = PyDict_New()) == NULL)
            goto cleanup;
    for (long i = 0; i < 40; i++) {
        PyObject *number = PyLong_FromLong(i); /* new reference */
        PyObject *text = number == NULL ? NULL : PyObject_Str(number); /* new reference */
        int set = text == NULL || PyDict_SetItem(dicts[0], text, number) < 0 ||
                  PyDict_SetItem(dicts[1], i % 2 ? text : number, number) < 0 ||
                  (i < 5 && PyDict_SetItem(dicts[2], text, Py_None) < 0) ? -1 : 0;
        Py_XDECREF(number);
        Py_XDECREF(text);
        if (set < 0)
            goto cleanup;
    }
    if (PyDict_DelItemString(dicts[0], "7") < 0 || PyDict_DelItemString(dicts[2], "0") < 0)
        goto cleanup;
    dict_entries_usable = 1;
    for (int d = 0; d < 3 && agree; d++)
        agree = dict_next_agrees(dicts[d]);
    dict_entries_usable = agree;
    checked = 1;
    rc = 0;
cleanup:
    for (int d = 0; d < 3; d++)
        Py_XDECREF(dicts[d]);
    return rc;
}

/* ---- the walker ---- */

/* A larger held-items stack (in references) is returned to the allocator between walks. */
#define HELD_KEEP 65536

/* New walker, or NULL with MemoryError. */
bw_walker *bw_walker_new(void) {
    if (check_dict_layout() < 0)
        return NULL;
    bw_walker *w = PyMem_Malloc(sizeof *w);
    if (w == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    w->held = NULL;
    w->held_len = w->held_cap = 0;
    w->plain_type = NULL;
    w->plain_version = 0;
    w->plain_dict_descr = NULL;
    return w;
}

void bw_walker_free(bw_walker *w) {
    if (w == NULL)
        return;
    PyMem_Free(w->held);
    PyMem_Free(w);
}

void bw_walker_init(bw_walker *w, const bw_encode_options *opts, bw_buf *out) {
    w->opts = opts;
    w->out = out;
    w->depth = 0;
    w->stack_floor = stack_floor();
    w->open_object = 0;
    w->open_start = 0;
    w->skip_keys = NULL;
    w->open_members = 0;
    w->runs = NULL;
    w->held_len = 0; /* every walk gives back what it held */
    if (w->held_cap > HELD_KEEP) {
        PyMem_Free(w->held);
        w->held = NULL;
        w->held_cap = 0;
    }
}

int bw_walker_enter(bw_walker *w, PyObject *obj) {
    /* Open containers are few (a document's nesting depth), so a scan beats a hash set. */
    for (int i = w->depth - 1; i >= 0; i--) {
        if (w->open[i] == obj) {
            PyErr_SetString(PyExc_ValueError, "Circular reference detected");
            return -1;
        }
    }
    if (w->depth >= BW_MAX_DEPTH) {
        PyErr_Format(PyExc_RecursionError,
                     "maximum nesting depth (%d) exceeded while encoding a JSON object",
                     BW_MAX_DEPTH);
        return -1;
    }
    if (stack_low(w))
        return bw_walker_check_stack(w); /* raises */
    w->open[w->depth++] = obj;
    return 0;
}

int bw_write_double(bw_buf *out, double v) {
    if (bw_buf_reserve(out, BW_FLOAT_TEXT_MAX) < 0)
        return bw_out_of_memory();
    out->len += bw_lone_double_to_text(v, bw_buf_tail(out));
    return 0;
}

/* An int too large for one CPython digit, or an int subclass: int.__repr__'s digits. */
static NOT_INLINED int write_long_other(bw_buf *out, PyObject *value) {
    int overflow = 0;
    long long small = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (!overflow) {
        if (small == -1 && PyErr_Occurred())
            return -1;
        if (bw_buf_reserve(out, BW_INT_TEXT_MAX) < 0)
            return bw_out_of_memory();
        out->len += bw_i64_to_text((int64_t)small, bw_buf_tail(out));
        return 0;
    }
    /* Big ints: int.__repr__ itself, so the interpreter's digit limit applies as in json. */
    PyObject *text = PyLong_Type.tp_repr(value); /* new reference */
    if (text == NULL)
        return -1;
    Py_ssize_t n = 0;
    const char *digits = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = -1;
    if (digits != NULL)
        rc = bw_buf_append(out, digits, (size_t)n) < 0 ? bw_out_of_memory() : 0;
    Py_DECREF(text);
    return rc;
}

int bw_write_long(bw_buf *out, PyObject *value) {
    if (PyLong_CheckExact(value)) {
        /* most integers fit one digit of CPython's representation: read it in place */
#if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)value)) {
            int64_t compact = (int64_t)PyUnstable_Long_CompactValue((PyLongObject *)value);
#else
        Py_ssize_t size = Py_SIZE(value);
        if (size >= -1 && size <= 1) {
            int64_t compact = (int64_t)size * (int64_t)((PyLongObject *)value)->ob_digit[0];
#endif
            if (bw_buf_reserve(out, BW_INT_TEXT_MAX) < 0)
                return bw_out_of_memory();
            out->len += bw_i64_to_text(compact, bw_buf_tail(out));
            return 0;
        }
    }
    return write_long_other(out, value);
}

static int write_literal(bw_buf *out, const char *text, size_t n) {
    return bw_buf_append(out, text, n) < 0 ? bw_out_of_memory() : 0;
}
#define WRITE_LITERAL(out, lit) write_literal((out), (lit), sizeof(lit) - 1)

/* A str (or subclass): its raw data, escaped as json escapes it. */
static int write_str(bw_walker *w, PyObject *s) {
    bw_buf *out = w->out;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const void *data = PyUnicode_DATA(s);
    int rc;
    if (!w->opts->ensure_ascii) {
        if (PyUnicode_IS_ASCII(s)) {
            rc = bw_json_string_utf8(out, data, (size_t)n);
        } else {
            Py_ssize_t size = 0;
            /* raises UnicodeEncodeError for lone surrogates, as json's .encode() would */
            const char *utf8 = PyUnicode_AsUTF8AndSize(s, &size);
            if (utf8 == NULL)
                return -1;
            rc = bw_json_string_utf8(out, utf8, (size_t)size);
        }
    } else {
        switch (PyUnicode_KIND(s)) {
        case PyUnicode_1BYTE_KIND:
            rc = bw_json_string_ucs1_inline(out, data, (size_t)n);
            break;
        case PyUnicode_2BYTE_KIND:
            rc = bw_json_string_ucs2(out, data, (size_t)n);
            break;
        default:
            rc = bw_json_string_ucs4(out, data, (size_t)n);
            break;
        }
    }
    return rc < 0 ? bw_out_of_memory() : 0;
}


/* The text of the exact floats items[from..size) as far as they run, each after ", ", at p
   (room reserved for all of them); *last is set to the last float's index. Returns the end of
   the text. A function of its own (not inlined into the walk, whose registers are taken by
   everything else it does), so that this loop, where an embedding's time goes, keeps its
   values in registers. */
static NOT_INLINED char *float_run_text(PyObject *const *items, Py_ssize_t from,
                                        Py_ssize_t size, char *p, Py_ssize_t *last) {
    /* The values are gathered a chunk at a time and written by the core's array loop, which
       keeps the text's common path inlined (a call per value costs about a tenth more). */
    enum { CHUNK = 64 };
    double values[CHUNK];
    Py_ssize_t i = from;
    size_t n;
    do {
        n = 0;
        while (n < CHUNK && i + 1 < size && PyFloat_CheckExact(items[i + 1]))
            values[n++] = PyFloat_AS_DOUBLE(items[++i]);
        if (n == 0)
            break;
        /* The next chunk's float objects are fetched while this chunk's text is written:
           the gathering above then finds them in cache instead of waiting on memory. */
        for (Py_ssize_t j = i + 1, end = size - i - 1 > CHUNK ? i + 1 + CHUNK : size; j < end; j++)
            __builtin_prefetch((const char *)items[j] + offsetof(PyFloatObject, ob_fval));
        p[0] = ',';
        p[1] = ' ';
        p = bw_doubles_to_text((const char *)values, n, sizeof values[0], p + 2);
    } while (n == CHUNK);
    *last = i;
    return p;
}

/* The items of an exact list or tuple, or of the snapshot list of a subclass, as json writes
   them; `marker` is what is marked open for cycle detection (the original object). A list is
   read by index with its size re-read on every step, as json reads an exact list, because a
   hook may change it while it is walked. */
static ALWAYS_INLINE int write_items(bw_walker *w, PyObject *marker, PyObject *seq) {
    bw_buf *out = w->out;
    int is_list = PyList_Check(seq);
    Py_ssize_t size = is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
    if (size == 0)
        return WRITE_LITERAL(out, "[]");
    if (bw_walker_enter(w, marker) < 0)
        return -1;
    if (bw_buf_append(out, "[", 1) < 0)
        goto nomem;
    for (Py_ssize_t i = 0;; i++) {
        size = is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i >= size)
            break;
        PyObject *item = is_list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
        if (bw_buf_reserve(out, BW_JSON_ELEMENT_ROOM) < 0)
            goto nomem;
        if (i > 0) {
            bw_buf_putc(out, ',');
            bw_buf_putc(out, ' ');
        }
        if (PyFloat_CheckExact(item)) {
            /* The embedding fast path: a run of exact floats. No Python code runs until the
               run ends (no call, no new object), so the sequence cannot change under it and
               its room is reserved once. */
            out->len += bw_double_to_text(PyFloat_AS_DOUBLE(item), bw_buf_tail(out));
            if (bw_buf_reserve(out, (size_t)(size - i - 1) * BW_JSON_ELEMENT_ROOM) < 0)
                goto nomem;
            PyObject *const *items = is_list ? ((PyListObject *)seq)->ob_item
                                             : ((PyTupleObject *)seq)->ob_item;
            char *p = float_run_text(items, i, size, bw_buf_tail(out), &i);
            out->len = (size_t)(p - out->data);
            continue;
        }
        Py_INCREF(item);
        int rc = bw_walk(w, item);
        Py_DECREF(item);
        if (rc < 0)
            goto error;
    }
    if (bw_buf_append(out, "]", 1) < 0)
        goto nomem;
    bw_walker_leave(w);
    return 0;
nomem:
    PyErr_NoMemory();
error:
    bw_walker_leave(w);
    return -1;
}

/* An exact list or tuple of exact floats (not bool, int or a float subclass: those are
   written as json writes them) becomes a pending run: its values are copied now, with the
   GIL, and its text is written by the thread that settles the buffer. No Python code runs
   during the copy (no call, no allocation of an object), so the sequence cannot change under
   it; what the values are when the walker reaches the list is what is written, as json
   writes a list when it reaches it. 1: written as a pending run; 0: not a run of floats
   (nothing written); -1: MemoryError. */
static int write_pending_run(bw_walker *w, PyObject *seq) {
    int is_list = PyList_CheckExact(seq);
    Py_ssize_t size = is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
    if (size < BW_PENDING_RUN_MIN)
        return 0;
    PyObject *const *items = is_list ? ((PyListObject *)seq)->ob_item
                                     : ((PyTupleObject *)seq)->ob_item;
    if (!PyFloat_CheckExact(items[0]))
        return 0; /* the common miss, before any room is reserved */
    /* json's nesting limit and the stack guard apply to this array as to any other */
    if (w->depth >= BW_MAX_DEPTH)
        return 0;
    if (bw_walker_check_stack(w) < 0)
        return -1;
    char *slots = bw_json_run_open(w->out, (size_t)size);
    if (slots == NULL)
        return bw_out_of_memory();
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *item = items[i];
        if (!PyFloat_CheckExact(item))
            return 0;
        double v = PyFloat_AS_DOUBLE(item);
        memcpy(slots + (size_t)i * sizeof v, &v, sizeof v);
    }
    bw_json_run_commit(w->out, w->runs, (size_t)size);
    return 1;
}

/* list, tuple and their subclasses (namedtuple) -> array. json reads exact lists and tuples
   from their storage but iterates a subclass (its __iter__, if overridden) into a list when
   it reaches it, before marking it open; so does this. */
static int write_sequence(bw_walker *w, PyObject *seq) {
    if (PyList_CheckExact(seq) || PyTuple_CheckExact(seq)) {
        if (w->runs != NULL) {
            int pending = write_pending_run(w, seq);
            if (pending != 0)
                return pending < 0 ? -1 : 0;
        }
        return write_items(w, seq, seq);
    }
    if (bw_walker_check_stack(w) < 0) /* __iter__ runs Python code before the mark */
        return -1;
    PyObject *snapshot = PySequence_Fast(seq, "_iterencode_list needs a sequence"); /* new */
    if (snapshot == NULL)
        return -1;
    int rc = write_items(w, seq, snapshot);
    Py_DECREF(snapshot);
    return rc;
}

/* json's key coercion. Returns a new reference to an exact str, or NULL with TypeError. */
static PyObject *coerce_key(PyObject *key) {
    if (PyUnicode_Check(key)) {
        if (PyUnicode_CheckExact(key))
            return Py_NewRef(key);
        return PyUnicode_FromKindAndData(PyUnicode_KIND(key), PyUnicode_DATA(key),
                                         PyUnicode_GET_LENGTH(key));
    }
    if (PyFloat_Check(key)) {
        char text[BW_FLOAT_TEXT_MAX];
        size_t n = bw_double_to_text(PyFloat_AS_DOUBLE(key), text);
        return PyUnicode_FromStringAndSize(text, (Py_ssize_t)n);
    }
    if (key == Py_True)
        return PyUnicode_FromString("true");
    if (key == Py_False)
        return PyUnicode_FromString("false");
    if (key == Py_None)
        return PyUnicode_FromString("null");
    if (PyLong_Check(key))
        return PyLong_Type.tp_repr(key);
    PyErr_Format(PyExc_TypeError, "keys must be str, int, float, bool or None, not %.100s",
                 Py_TYPE(key)->tp_name);
    return NULL;
}

static int is_skipped(bw_walker *w, PyObject *key) {
    if (w->skip_keys == NULL)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(w->skip_keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *skip = PyTuple_GET_ITEM(w->skip_keys, i);
        if (PyUnicode_GET_LENGTH(skip) == PyUnicode_GET_LENGTH(key) &&
            PyUnicode_Compare(skip, key) == 0)
            return 1;
    }
    return 0;
}

/* ---- the text of repeating keys ----
   Documents repeat their keys, and a key written in source code is interned: one object for
   every document. The text `, "key": ` of a short interned key that needs no escape (the same
   in both ensure_ascii modes) is kept here by the key's address, with a reference to the key:
   while an entry holds it, no other object can have that address, so a matching address is
   that very key, never a stale pointer. Bounded: one entry per slot, a newer key taking over
   a slot (and its reference given back). GIL held throughout. */
#define KEY_SLOTS 512
#define KEY_TEXT_ROOM 24 /* `, "` + 15 bytes + `": ` is 21: one fixed-size copy writes it */
typedef struct {
    PyObject *key; /* owned, or NULL */
    size_t len;    /* of text, separator included */
    char text[KEY_TEXT_ROOM];
} key_text;
static key_text key_texts[KEY_SLOTS];

static inline key_text *key_slot(PyObject *key) {
    return &key_texts[((uintptr_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> 55 & (KEY_SLOTS - 1)];
}

/* Keeps `, "key": ` (n bytes of clean key text at text) in key's slot. */
static void keep_key_text(PyObject *key, const char *text, size_t n) {
    key_text *slot = key_slot(key);
    PyObject *old = slot->key;
    slot->key = Py_NewRef(key);
    memcpy(slot->text, ", \"", 3);
    memcpy(slot->text + 3, text, n);
    memcpy(slot->text + 3 + n, "\": ", 3);
    slot->len = n + 6;
    Py_XDECREF(old); /* a str: its release runs no Python code */
}

/* Writes `"key": ` (with the separator before it when needed). Inlined in the dict walks:
   as a call of its own it cost a tenth of a small document's walk. */
static ALWAYS_INLINE int write_member_key(bw_walker *w, PyObject *key, Py_ssize_t written) {
    bw_buf *out = w->out;
    key_text *slot = key_slot(key);
    if (slot->key == key) {
        if (bw_buf_reserve(out, KEY_TEXT_ROOM) < 0)
            return bw_out_of_memory();
        size_t skip = written > 0 ? 0 : 2; /* the first member has no separator */
        memcpy(bw_buf_tail(out), slot->text + skip, KEY_TEXT_ROOM - 2);
        out->len += slot->len - skip;
        return 0;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    if (PyUnicode_IS_ASCII(key) && n < BW_JSON_SHORT) {
        /* a short clean key (most are) with its separators in one reservation: `, "key": ` */
        if (bw_buf_reserve(out, BW_JSON_SHORT + 6) < 0)
            return bw_out_of_memory();
        char *p = bw_buf_tail(out), *start = p;
        if (written > 0) {
            *p++ = ',';
            *p++ = ' ';
        }
        *p++ = '"';
        if (bw_json_short_clean(PyUnicode_1BYTE_DATA(key), (size_t)n, p) == (size_t)n) {
            if (PyUnicode_CHECK_INTERNED(key))
                keep_key_text(key, p, (size_t)n);
            p += n;
            memcpy(p, "\": ", 3);
            out->len += (size_t)(p + 3 - start);
            return 0;
        }
    }
    if (written > 0 && bw_buf_append(out, ", ", 2) < 0)
        return bw_out_of_memory();
    if (write_str(w, key) < 0)
        return -1;
    if (bw_buf_append(out, ": ", 2) < 0)
        return bw_out_of_memory();
    return 0;
}

/* Room for n more held references. 0, or -1 with MemoryError. */
static int reserve_held(bw_walker *w, size_t n) {
    if (w->held_cap - w->held_len >= n)
        return 0;
    size_t cap = w->held_cap ? w->held_cap : 64;
    while (cap - w->held_len < n) {
        if (cap > PY_SSIZE_T_MAX / (2 * sizeof(PyObject *)))
            return bw_out_of_memory();
        cap *= 2;
    }
    PyObject **held = PyMem_Realloc(w->held, cap * sizeof(PyObject *));
    if (held == NULL)
        return bw_out_of_memory();
    w->held = held;
    w->held_cap = cap;
    return 0;
}

/* Scalars whose writing runs no Python code: no call, and no allocation of an object the
   cyclic GC tracks (whose collection could run a finalizer that changes the dict). */
static inline int is_inert_scalar(PyObject *value) {
    PyTypeObject *t = Py_TYPE(value);
    return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || value == Py_None ||
           value == Py_True || value == Py_False;
}

/* Containers up to this size are looked through by is_inert; larger ones are held. */
#define INERT_SCAN_MAX 16

/* Values whose writing runs no Python code (see is_inert_scalar): those scalars, a short
   exact list or tuple of them, a short exact dict of them under exact str keys, and, with
   the entity conventions, an exact datetime. A dict's walk goes on straight from the dict
   while its values are inert; it holds the rest (json's snapshot) from the first other one. */
static int is_inert(const bw_walker *w, PyObject *value) {
    PyTypeObject *t = Py_TYPE(value);
    if (is_inert_scalar(value))
        return 1;
    if (t == &PyList_Type || t == &PyTuple_Type) {
        Py_ssize_t n = Py_SIZE(value);
        if (n > INERT_SCAN_MAX)
            return 0;
        PyObject *const *items = t == &PyList_Type ? ((PyListObject *)value)->ob_item
                                                   : ((PyTupleObject *)value)->ob_item;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!is_inert_scalar(items[i]))
                return 0;
        return 1;
    }
    if (t == &PyDict_Type) {
        if (PyDict_GET_SIZE(value) > INERT_SCAN_MAX)
            return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (dict_next(value, &pos, &k, &v))
            if (!PyUnicode_CheckExact(k) || !is_inert_scalar(v))
                return 0;
        return 1;
    }
    return w->opts->hook_kind == BW_HOOK_ENTITY && bw_entity_is_exact_datetime(value);
}

/* json writes the items a dict has when it is reached (3.11's encoder takes items() as a
   list), whatever a hook then does to the dict. From the item (key, value) on, whose value
   may run Python code, this pushes references to the dict's remaining keys and values onto
   w->held, the same snapshot without a tuple per item; `pos` is PyDict_Next's position after
   that item and `taken` how many items came before it.
   1: pushed, every key an exact str; 0: nothing pushed, some key is not (the caller takes
   json's general path); -1: MemoryError. */
static int hold_rest(bw_walker *w, PyObject *dict, Py_ssize_t pos, Py_ssize_t taken,
                     PyObject *key, PyObject *value) {
    Py_ssize_t count = PyDict_GET_SIZE(dict) - taken;
    if (reserve_held(w, 2 * (size_t)count) < 0)
        return -1;
    /* No Python code runs in this loop (no call, no allocation, no release), so the dict
       has exactly `count` items left throughout. */
    PyObject **slot = w->held + w->held_len;
    slot[0] = Py_NewRef(key);
    slot[1] = Py_NewRef(value);
    Py_ssize_t held = 1;
    while (held < count && dict_next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            /* The dict still holds each of these, so releasing them runs no code. */
            for (Py_ssize_t i = 2 * held - 1; i >= 0; i--)
                Py_DECREF(slot[i]);
            return 0;
        }
        slot[2 * held] = Py_NewRef(key);
        slot[2 * held + 1] = Py_NewRef(value);
        held++;
    }
    w->held_len += 2 * (size_t)held;
    return 1;
}

/* Any other mapping: items() as json reads them, keys coerced. Keys that collide after
   coercion keep the first position and the last value (what json.loads does), but every
   value is still encoded, so hooks run and errors surface exactly as in the round trip. */
static int write_coerced_members(bw_walker *w, PyObject *dict, int skipping, Py_ssize_t *written) {
    bw_buf *out = w->out;
    PyObject *items = NULL, *encoded = NULL, *key = NULL, *text = NULL;
    int rc = -1;
    /* the values' bytes are copied out of the buffer and back: no pending runs among them */
    bw_json_runs *runs = w->runs;
    w->runs = NULL;
    items = PyMapping_Items(dict); /* new reference: a list, safe against mutation */
    if (items == NULL)
        goto done;
    encoded = PyDict_New(); /* coerced key -> bytes of the encoded value */
    if (encoded == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_ValueError, "items must return 2-tuples");
            goto done;
        }
        key = coerce_key(PyTuple_GET_ITEM(item, 0));
        if (key == NULL)
            goto done;
        size_t start = out->len;
        if (bw_walk(w, PyTuple_GET_ITEM(item, 1)) < 0)
            goto done;
        text = PyBytes_FromStringAndSize(out->data + start, (Py_ssize_t)(out->len - start));
        out->len = start;
        if (text == NULL || PyDict_SetItem(encoded, key, text) < 0)
            goto done;
        Py_CLEAR(key);
        Py_CLEAR(text);
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(encoded, &pos, &k, &v)) {
        if (skipping && is_skipped(w, k))
            continue;
        if (write_member_key(w, k, *written) < 0)
            goto done;
        if (bw_buf_append(out, PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v)) < 0) {
            bw_out_of_memory();
            goto done;
        }
        (*written)++;
    }
    rc = 0;
done:
    w->runs = runs;
    Py_XDECREF(items);
    Py_XDECREF(encoded);
    Py_XDECREF(key);
    Py_XDECREF(text);
    return rc;
}

/* Writes the members held from w->held[base] on (key, value pairs of exact str keys: unique,
   nothing to coerce), then pops and releases them. By index, never by pointer: a nested
   dict may move w->held. Released at the end, in reverse, as json's items list is, so a
   value that a hook removes from the dict lives as long as it does under json. */
static int write_held_members(bw_walker *w, size_t base, int skipping, Py_ssize_t *written) {
    int rc = 0;
    size_t end = w->held_len;
    for (size_t i = base; i < end && rc == 0; i += 2) {
        PyObject *key = w->held[i];
        if (skipping && is_skipped(w, key))
            continue;
        rc = write_member_key(w, key, *written);
        if (rc == 0)
            rc = bw_walk(w, w->held[i + 1]);
        if (rc == 0)
            (*written)++;
    }
    w->held_len = base;
    for (size_t i = end; i > base; i--)
        Py_DECREF(w->held[i - 1]);
    return rc;
}

/* An exact dict in one pass over its items: those with inert values are written straight
   from the dict; at the first value that may run Python code the rest is held (hold_rest)
   and walked from there. 1: written; 0: a key is not an exact str, and the output is back
   where it was (the caller takes json's general path, the coercing one); -1: error. */
static int write_str_members(bw_walker *w, PyObject *dict, int skipping, Py_ssize_t *written) {
    bw_buf *out = w->out;
    size_t start = out->len;
    Py_ssize_t pos = 0, taken = 0, size = PyDict_GET_SIZE(dict);
    PyObject *key, *value;
    /* only inert values are written in this loop: no Python code runs, so `size` holds */
    while (taken < size && dict_next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            goto rewind;
        if (!is_inert(w, value)) {
            size_t base = w->held_len;
            int held = hold_rest(w, dict, pos, taken, key, value);
            if (held == 0)
                goto rewind;
            if (held < 0 || write_held_members(w, base, skipping, written) < 0)
                return -1;
            return 1;
        }
        taken++;
        if (skipping && is_skipped(w, key))
            continue;
        if (write_member_key(w, key, *written) < 0)
            return -1;
        /* the commonest values without a second dispatch (bw_walk's first two tests) */
        PyTypeObject *t = Py_TYPE(value);
        int rc = t == &PyUnicode_Type ? write_str(w, value)
                 : t == &PyLong_Type  ? bw_write_long(out, value)
                                      : bw_walk(w, value);
        if (rc < 0)
            return -1;
        (*written)++;
    }
    return 1;
rewind:
    out->len = start;
    *written = 0;
    return 0;
}

static int write_dict(bw_walker *w, PyObject *dict) {
    bw_buf *out = w->out;
    /* The document's top-level object is left open for the caller (bw_walk_open_object):
       it is the first thing written since the walk started. */
    int leave_open = w->open_object && out->len == w->open_start;
    if (leave_open)
        w->open_object = 0;
    if (PyDict_GET_SIZE(dict) == 0 && !leave_open)
        return WRITE_LITERAL(out, "{}");
    if (bw_walker_enter(w, dict) < 0)
        return -1;
    Py_ssize_t written = 0;
    int rc, walked = 0;
    if (bw_buf_append(out, "{", 1) < 0) {
        rc = bw_out_of_memory();
    } else if (PyDict_CheckExact(dict) &&
               (walked = write_str_members(w, dict, leave_open, &written)) != 0) {
        rc = walked < 0 ? -1 : 0;
    } else {
        rc = write_coerced_members(w, dict, leave_open, &written);
    }
    if (rc == 0 && leave_open)
        w->open_members = written;
    else if (rc == 0 && bw_buf_append(out, "}", 1) < 0)
        rc = bw_out_of_memory();
    bw_walker_leave(w);
    return rc;
}

static int raise_not_serializable(PyObject *obj) {
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
    if (name == NULL)
        return -1;
    PyErr_Format(PyExc_TypeError, "Object of type %U is not JSON serializable", name);
    Py_DECREF(name);
    return -1;
}

/* Everything json hands to its default hook. The object is marked before the hook runs
   (as json does), so a hook that returns the object itself is a cycle. */
static int write_other(bw_walker *w, PyObject *obj) {
    const bw_encode_options *opts = w->opts;
    if (opts->hook_kind == BW_HOOK_NONE)
        return raise_not_serializable(obj);
    if (bw_walker_enter(w, obj) < 0)
        return -1;
    int rc;
    if (opts->hook_kind == BW_HOOK_ENTITY) {
        rc = bw_entity_encode(w, obj);
    } else {
        PyObject *converted = PyObject_CallOneArg(opts->hook, obj); /* new reference */
        if (converted == NULL) {
            rc = -1;
        } else {
            rc = bw_walk(w, converted);
            Py_DECREF(converted);
        }
    }
    bw_walker_leave(w);
    return rc;
}

int bw_walk(bw_walker *w, PyObject *obj) {
    bw_buf *out = w->out;
    /* exact types first, in the order documents hold them: each goes where json's order of
       isinstance checks below sends it */
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyUnicode_Type)
        return write_str(w, obj);
    if (t == &PyLong_Type)
        return bw_write_long(out, obj);
    if (t == &PyFloat_Type)
        return bw_write_double(out, PyFloat_AS_DOUBLE(obj));
    if (t == &PyDict_Type)
        return write_dict(w, obj);
    if (t == &PyList_Type)
        return write_sequence(w, obj);
    if (obj == Py_None)
        return WRITE_LITERAL(out, "null");
    if (obj == Py_True)
        return WRITE_LITERAL(out, "true");
    if (obj == Py_False)
        return WRITE_LITERAL(out, "false");
    if (w->opts->hook_kind == BW_HOOK_ENTITY) {
        /* an exact datetime is none of json's types below: its hook's text, as write_other
           would write it, without the subclass checks */
        int written = bw_entity_write_exact_datetime(w, obj);
        if (written != 0)
            return written < 0 ? -1 : 0;
    }
    if (PyUnicode_Check(obj))
        return write_str(w, obj);
    if (PyLong_Check(obj))
        return bw_write_long(out, obj);
    if (PyFloat_Check(obj))
        return bw_write_double(out, PyFloat_AS_DOUBLE(obj));
    if (PyList_Check(obj) || PyTuple_Check(obj))
        return write_sequence(w, obj);
    if (PyDict_Check(obj))
        return write_dict(w, obj);
    return write_other(w, obj);
}

/* write_other for an entity whose members bw_entity_plain_members gave: obj is marked open
   (as before its hook), then its members' dict is written. */
static int write_plain_entity(bw_walker *w, PyObject *obj, PyObject *own_members) {
    if (bw_walker_enter(w, obj) < 0)
        return -1;
    int rc = write_dict(w, own_members);
    bw_walker_leave(w);
    return rc;
}

int bw_walk_open_object(bw_walker *w, PyObject *obj, PyObject *own_members, PyObject *skip_keys,
                        Py_ssize_t *members) {
    w->open_object = 1;
    w->open_start = w->out->len;
    w->skip_keys = skip_keys;
    w->open_members = 0;
    int rc = own_members != NULL ? write_plain_entity(w, obj, own_members) : bw_walk(w, obj);
    int left_open = !w->open_object;
    w->open_object = 0;
    w->skip_keys = NULL;
    if (rc < 0)
        return -1;
    if (!left_open) {
        w->out->len = w->open_start;
        PyErr_Format(PyExc_TypeError,
                     "a document must encode to a JSON object, but %.100s does not",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *members = w->open_members;
    return 0;
}
