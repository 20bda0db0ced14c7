/* The object walker: Python object graph -> JSON bytes, byte-identical to
   json.dumps(json.loads(json.dumps(x, default=hook))). Binding layer (knows Python). */
#ifndef BW_ENCODER_H
#define BW_ENCODER_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "json_array.h"
#include "out_buffer.h"

/* Containers and hook calls open at once before RecursionError: the upper bound. A thread
   whose C stack runs low first gets RecursionError earlier (bw_walker_enter checks the stack
   that is really left), so no nesting and no thread stack size can overflow it. */
#define BW_MAX_DEPTH 2048

typedef enum {
    BW_HOOK_NONE,     /* default=None: plain json, unknown types raise TypeError */
    BW_HOOK_ENTITY,   /* the built-in entity conventions, in C */
    BW_HOOK_CALLABLE, /* any Python callable; its result is walked again */
} bw_hook_kind;

typedef struct {
    bw_hook_kind hook_kind;
    PyObject *hook; /* borrowed; the callable for BW_HOOK_CALLABLE, else NULL */
    int ensure_ascii;
    int float32_shortest;
} bw_encode_options;

/* The shortest list of floats that becomes a pending run: below it, the copy and the
   separate pass cost more than the text itself. */
#define BW_PENDING_RUN_MIN 16

typedef struct bw_walker {
    const bw_encode_options *opts;
    bw_buf *out;
    int depth;
    /* RecursionError when the C stack reaches below this address (0: not known). */
    uintptr_t stack_floor;
    /* Owned references: the items of the dicts being walked, as they were when each was
       reached (key, value, key, value, ...), a stack shared by the nested dicts. */
    PyObject **held;
    size_t held_len, held_cap;
    /* bw_walk_open_object's request: leave the first object open, skipping these keys */
    int open_object;
    size_t open_start;
    PyObject *skip_keys; /* borrowed tuple of str, or NULL */
    Py_ssize_t open_members;
    /* Not NULL: exact lists and tuples of at least BW_PENDING_RUN_MIN exact floats become
       pending runs of out (json_array.h), their text written later by another thread. */
    bw_json_runs *runs;
    /* The last class judged plain (bw_entity_plain_members), kept across walks: its
       version tag then, and its __dict__ descriptor (borrowed: the class holds it while its
       version tag stays the same). plain_type is only compared, never dereferenced. */
    PyTypeObject *plain_type;
    unsigned int plain_version;
    PyObject *plain_dict_descr;
    PyObject *open[BW_MAX_DEPTH]; /* borrowed: what is being walked, for cycle detection */
} bw_walker;

/* A walker on the heap (its open-container stack is large), reusable across walks:
   bw_walker_init before each. NULL with MemoryError set. bw_walker_free(NULL) is a no-op. */
bw_walker *bw_walker_new(void);
void bw_walker_free(bw_walker *w);
void bw_walker_init(bw_walker *w, const bw_encode_options *opts, bw_buf *out);

/* Appends the JSON of obj to w->out. 0, or -1 with an exception set; on error w->out may
   hold a partial value past its original length, which the caller truncates. */
int bw_walk(bw_walker *w, PyObject *obj);

/* Like bw_walk, for a value that must become a JSON object, which is left open: writes '{'
   and the members, skipping those whose (coerced) key is in skip_keys (a tuple of str, or
   NULL), and sets *members to how many were written. The caller writes more and '}'.
   own_members: NULL, or what bw_entity_plain_members gave for obj, with no Python code run
   since: obj is then written as the entity conventions write it, from that dict. */
int bw_walk_open_object(bw_walker *w, PyObject *obj, PyObject *own_members, PyObject *skip_keys,
                        Py_ssize_t *members);

/* Shared by the walker's parts (py_encode_entity.c, py_encode_numpy.c). */
int bw_walker_enter(bw_walker *w, PyObject *obj); /* cycle, depth, stack check, then push */
/* RecursionError when the C stack is nearly used up: 0, or -1 with the exception set. */
int bw_walker_check_stack(const bw_walker *w);
static inline void bw_walker_leave(bw_walker *w) { w->depth--; }
int bw_write_double(bw_buf *out, double v);
int bw_write_long(bw_buf *out, PyObject *value); /* int.__repr__ of an int (or subclass) */
int bw_out_of_memory(void);                       /* sets MemoryError, returns -1 */

/* The entity conventions: writes obj's JSON (walking what the rule gives) or raises the
   conventions' TypeError. obj is already marked as open by the caller. */
int bw_entity_encode(bw_walker *w, PyObject *obj);
/* getattr(obj, name, None) that lets every error but AttributeError through, without making
   the AttributeError where the lookup can spare it (object's own lookup). New reference, or
   NULL with no exception (absent) or with one (failure). */
PyObject *bw_optional_attr(PyObject *obj, PyObject *name);
/* 1 when obj is an exact datetime.datetime (which the conventions write without running
   any Python code), else 0. */
int bw_entity_is_exact_datetime(PyObject *obj);
/* The conventions' text of an exact datetime.datetime, written as write_other would write
   it (hooked: the depth limit and the stack guard apply), without marking it open: a
   datetime holds nothing that could lead back to it. 1 written, 0 not an exact datetime or
   at the depth limit (nothing written), -1 with an exception. */
int bw_entity_write_exact_datetime(bw_walker *w, PyObject *obj);
/* 1 when obj is the official client's MetadataAsDictionary (the conventions write its
   `metadata`), 0 when not, -1 with an exception set. */
int bw_entity_is_client_metadata(PyObject *obj);
/* New reference: the __dict__ the entity conventions write for obj, found without running
   any Python code, when obj is an instance of a plain class (see py_encode_entity.c) whose
   __dict__ is a non-empty exact dict of str keys without "to_json"; the verdict on the class
   is kept in w until the class changes (its version tag). NULL without an exception when
   the general rule must decide (bw_entity_encode), NULL with one on error. *metadata_key
   (when not NULL) says whether the dict has the key "@metadata". */
PyObject *bw_entity_plain_members(bw_walker *w, PyObject *obj, int *metadata_key);
/* NumPy: ndarrays as ndarray.tolist() would give, scalars as .item(). 1 when obj was
   handled, 0 when it is not a NumPy object (or, with exact_only, not of an exact NumPy
   type), -1 on error. */
int bw_numpy_encode(bw_walker *w, PyObject *obj, int exact_only);

/* Module setup for the walker's parts. 0, or -1 with an exception set. */
int bw_entity_init(void);

/* The names both entity conventions look up, the walker's (py_encode_entity.c) and bulk
   insert's (py_conventions.c): interned once by bw_entity_init, and kept. */
typedef struct {
    PyObject *id;           /* "Id" */
    PyObject *metadata_key; /* "@metadata" */
    PyObject *dict;         /* "__dict__" */
    PyObject *metadata;     /* "metadata" */
} bw_entity_name_set;
extern bw_entity_name_set bw_entity_names;
int bw_encoder_add_to_module(PyObject *module);
/* The singleton that selects the entity conventions (borrowed). */
PyObject *bw_entity_sentinel(void);
#endif
