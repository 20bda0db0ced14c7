/* The PUT command of a bulk insert body, as the official client writes it:
     {"Id":<id>,"Type":"PUT","Document":{<members>, "@metadata": <metadata>}}
   Its callers (the CommandWriter's put, batch encoding) write the id's JSON string, the
   document's '{' and members and the metadata object in their own ways; the bytes around
   those are written here only. Each writer returns 0, or -1 when out of memory. No Python. */
#ifndef BW_PUT_COMMAND_H
#define BW_PUT_COMMAND_H
#include "out_buffer.h"

/* Before the id. */
static inline int bw_put_command_open(bw_buf *out) {
    return BW_BUF_APPEND_LITERAL(out, "{\"Id\":");
}

/* Between the id and the document's '{'. */
static inline int bw_put_command_document(bw_buf *out) {
    return BW_BUF_APPEND_LITERAL(out, ",\"Type\":\"PUT\",\"Document\":");
}

/* After the document's members (json's ", " when it has any), before the metadata. */
static inline int bw_put_command_metadata(bw_buf *out, int after_members) {
    if (after_members && BW_BUF_APPEND_LITERAL(out, ", ") < 0)
        return -1;
    return BW_BUF_APPEND_LITERAL(out, "\"@metadata\": ");
}

/* After the metadata: closes the document and the command. */
static inline int bw_put_command_close(bw_buf *out) {
    return BW_BUF_APPEND_LITERAL(out, "}}");
}
#endif
