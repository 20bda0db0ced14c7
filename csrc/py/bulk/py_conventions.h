/* The document conventions of bulk insert, next to the walker: what a valid id is, where an
   entity's own id and @metadata are found, which members its body leaves out, and how the
   @metadata is merged. BulkWriter.store (through CommandWriter.store) and
   bulkwire.conventions use these; nothing else has a copy. */
#ifndef BW_PY_CONVENTIONS_H
#define BW_PY_CONVENTIONS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "py_encoder.h"

/* Borrowed: ("Id", "@metadata"), the members an entity's document body never holds. */
PyObject *bw_body_excluded_keys(void);

/* 0 when id is a valid document id by the one id rule (bw_document_id_check, document_id.h):
   a str that is not empty, not only whitespace (str.isspace), does not end with '|' and
   holds no lone surrogate. Otherwise -1 with TypeError or ValueError naming `name` ("id",
   "entity's Id") and the problem. */
int bw_check_id(PyObject *id, const char *name);

/* The entity's own members: its @metadata (NULL when it has none) and, when want_id, its Id
   (NULL when it has none). A dict's keys, any other object's __dict__ / Id attribute. With
   plain (a walker of the entity conventions), an instance of a plain class has its __dict__
   fetched once, by bw_entity_plain_members, and given in *members for its walk; otherwise
   *members is NULL. 0 with new references (or NULL) in *own_metadata, *own_id and *members,
   or -1 with an exception set. */
int bw_entity_members(PyObject *entity, bw_walker *plain, int want_id, PyObject **own_metadata,
                      PyObject **own_id, PyObject **members);

/* New reference: a new dict, the entity's own @metadata mapping (own, may be NULL), then
   metadata (may be NULL; a later key wins), then each of defaults (a dict) where not already
   given. Anything else than a mapping raises TypeError naming it. */
PyObject *bw_merge_metadata(PyObject *own, PyObject *metadata, PyObject *defaults);

/* Adds check_id, id_problem, merge_metadata, BODY_EXCLUDED_KEYS and ID_PROBLEMS. 0, or -1 with an exception set. */
int bw_conventions_add_to_module(PyObject *module);
#endif
