/* The document id rule of bulk insert, in one place: every way bulkwire writes a command
   for a document (an entity's store, an Arrow row, counters, time series, attachments, the
   official client's drop-in) asks this function, so they accept and refuse the same ids.
   Core layer: UTF-8 bytes in, a verdict out; no Python.

   A valid id is valid UTF-8, not empty, not only whitespace (the characters str.isspace()
   calls whitespace) and does not end with '|' (the server would make up the id: server-side
   identities are not supported in bulk insert). */
#ifndef BW_DOCUMENT_ID_H
#define BW_DOCUMENT_ID_H
#include <stddef.h>

typedef enum {
    BW_ID_OK = 0,
    BW_ID_EMPTY,       /* no character at all */
    BW_ID_BLANK,       /* only whitespace */
    BW_ID_ENDS_WITH_PIPE,
    BW_ID_NOT_UTF8,
} bw_id_problem;

/* The verdict on the id `prefix` followed by `text` (UTF-8 bytes; either may be empty, a
   NULL pointer only with a length of 0). The problems are found in the order of the enum's
   values after BW_ID_OK, but BW_ID_NOT_UTF8 comes before BW_ID_BLANK: whitespace is only
   judged on valid text. */
bw_id_problem bw_document_id_check(const char *prefix, size_t prefix_len, const char *text,
                                   size_t text_len);
/* bw_document_id_check for text already known to be valid UTF-8 (a Python str's own UTF-8):
   the same verdict, without reading the bytes again to judge their encoding. */
bw_id_problem bw_document_id_check_valid_utf8(const char *prefix, size_t prefix_len,
                                              const char *text, size_t text_len);

/* The problem as words that follow the id's name ("id is empty"); "" for BW_ID_OK. A static
   string. */
const char *bw_document_id_problem_text(bw_id_problem problem);

/* Whether the valid UTF-8 `text` holds only characters str.isspace() calls whitespace
   (the empty text: 1). */
int bw_utf8_all_space(const char *text, size_t n);
#endif
