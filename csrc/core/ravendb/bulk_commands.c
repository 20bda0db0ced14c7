#include "bulk_commands.h"

#include "float_text.h"
#include "int_text.h"
#include "json_string.h"

int bw_command_batch_close(bw_buf *out) {
    return BW_BUF_APPEND_LITERAL(out, "]}}");
}

int bw_counters_open(bw_buf *out, const char *id, size_t id_len) {
    if (BW_BUF_APPEND_LITERAL(out, "{\"Id\":") < 0 || bw_json_string_utf8(out, id, id_len) < 0 ||
        BW_BUF_APPEND_LITERAL(out, ",\"Type\":\"Counters\",\"Counters\":{\"DocumentId\":") < 0 ||
        bw_json_string_utf8(out, id, id_len) < 0)
        return -1;
    return BW_BUF_APPEND_LITERAL(out, ",\"Operations\":[");
}

/* Appends the decimal text of v. */
static int append_i64(bw_buf *out, int64_t v) {
    if (bw_buf_reserve(out, BW_INT_TEXT_MAX) < 0)
        return -1;
    out->len += bw_i64_to_text(v, bw_buf_tail(out));
    return 0;
}

int bw_counter_increment(bw_buf *out, int after, const char *name, size_t name_len, int64_t delta) {
    if (after && bw_buf_append(out, ",", 1) < 0)
        return -1;
    if (BW_BUF_APPEND_LITERAL(out, "{\"Type\":\"Increment\",\"CounterName\":") < 0 ||
        bw_json_string_utf8(out, name, name_len) < 0 ||
        BW_BUF_APPEND_LITERAL(out, ",\"Delta\":") < 0 || append_i64(out, delta) < 0)
        return -1;
    return bw_buf_append(out, "}", 1);
}

int bw_time_series_open(bw_buf *out, const char *id, size_t id_len, const char *name,
                        size_t name_len) {
    if (BW_BUF_APPEND_LITERAL(out, "{\"Id\":") < 0 || bw_json_string_utf8(out, id, id_len) < 0 ||
        BW_BUF_APPEND_LITERAL(out, ",\"Type\":\"TimeSeriesBulkInsert\",\"TimeSeries\":{\"Name\":") < 0 ||
        bw_json_string_utf8(out, name, name_len) < 0)
        return -1;
    return BW_BUF_APPEND_LITERAL(out, ",\"TimeFormat\":\"UnixTimeInMs\",\"Appends\":[");
}

int bw_time_series_entry_open(bw_buf *out, int after, int64_t unix_ms, size_t values) {
    if (bw_buf_append(out, after ? ",[" : "[", after ? 2 : 1) < 0 || append_i64(out, unix_ms) < 0 ||
        bw_buf_append(out, ",", 1) < 0)
        return -1;
    return append_i64(out, (int64_t)values);
}

int bw_time_series_value_double(bw_buf *out, double value) {
    if (bw_buf_reserve(out, 1 + BW_FLOAT_TEXT_MAX) < 0)
        return -1;
    bw_buf_putc(out, ',');
    out->len += bw_double_to_text(value, bw_buf_tail(out));
    return 0;
}

int bw_time_series_value_int(bw_buf *out, int64_t value) {
    if (bw_buf_append(out, ",", 1) < 0)
        return -1;
    return append_i64(out, value);
}

int bw_time_series_value_null(bw_buf *out) {
    return BW_BUF_APPEND_LITERAL(out, ",null");
}

int bw_time_series_entry_close(bw_buf *out, const char *tag, size_t tag_len) {
    if (tag != NULL && (bw_buf_append(out, ",", 1) < 0 || bw_json_string_utf8(out, tag, tag_len) < 0))
        return -1;
    return bw_buf_append(out, "]", 1);
}

int bw_attachment_header(bw_buf *out, const char *id, size_t id_len, const char *name,
                         size_t name_len, const char *content_type, size_t content_type_len,
                         uint64_t length) {
    if (BW_BUF_APPEND_LITERAL(out, "{\"Id\":") < 0 || bw_json_string_utf8(out, id, id_len) < 0 ||
        BW_BUF_APPEND_LITERAL(out, ",\"Type\":\"AttachmentPUT\",\"Name\":") < 0 ||
        bw_json_string_utf8(out, name, name_len) < 0)
        return -1;
    if (content_type != NULL && content_type_len > 0 &&
        (BW_BUF_APPEND_LITERAL(out, ",\"ContentType\":") < 0 ||
         bw_json_string_utf8(out, content_type, content_type_len) < 0))
        return -1;
    if (BW_BUF_APPEND_LITERAL(out, ",\"ContentLength\":") < 0 ||
        bw_buf_reserve(out, BW_INT_TEXT_MAX + 1) < 0)
        return -1;
    out->len += bw_u64_to_text(length, bw_buf_tail(out));
    bw_buf_putc(out, '}');
    return 0;
}
