/* The bulk insert commands other than PUT, as the official client writes them:
     {"Id":<id>,"Type":"Counters","Counters":{"DocumentId":<id>,"Operations":[<op>,...]}}
       <op> = {"Type":"Increment","CounterName":<name>,"Delta":<delta>}
     {"Id":<id>,"Type":"TimeSeriesBulkInsert","TimeSeries":{"Name":<name>,
       "TimeFormat":"UnixTimeInMs","Appends":[<entry>,...]}}
       <entry> = [<unix ms>,<number of values>,<value>,...(,<tag>)]
     {"Id":<id>,"Type":"AttachmentPUT","Name":<name>(,"ContentType":<type>),
       "ContentLength":<n>} followed by the attachment's n raw bytes
   Strings are UTF-8 text written as JSON strings without ASCII escaping. Counters and time
   series commands stay open across calls (their operations are appended one by one); the
   caller closes them with bw_command_batch_close. Each writer returns 0, or -1 when out of
   memory (what it wrote so far stays: the caller rolls the buffer back). No Python. */
#ifndef BW_BULK_COMMANDS_H
#define BW_BULK_COMMANDS_H
#include <stddef.h>
#include <stdint.h>
#include "out_buffer.h"

/* Most operations of one counters or time series command; the next one opens another. */
#define BW_COMMAND_BATCH_MAX 1024

/* Ends an open counters or time series command. */
int bw_command_batch_close(bw_buf *out);
/* A counters command up to its first operation. */
int bw_counters_open(bw_buf *out, const char *id, size_t id_len);
/* One increment; `after` says an operation came before it in this command. */
int bw_counter_increment(bw_buf *out, int after, const char *name, size_t name_len, int64_t delta);
/* A time series command up to its first entry. */
int bw_time_series_open(bw_buf *out, const char *id, size_t id_len, const char *name,
                        size_t name_len);
/* An entry up to its values (`after`: an entry came before it in this command). */
int bw_time_series_entry_open(bw_buf *out, int after, int64_t unix_ms, size_t values);
/* One value of an entry: a finite double (Python's repr text), an integer, or null. */
int bw_time_series_value_double(bw_buf *out, double value);
int bw_time_series_value_int(bw_buf *out, int64_t value);
int bw_time_series_value_null(bw_buf *out);
/* The tag (when there is one) and the end of the entry. */
int bw_time_series_entry_close(bw_buf *out, const char *tag, size_t tag_len);
/* An attachment's command; the caller appends its `length` raw bytes right after it.
   content_type NULL (or empty) leaves ContentType out. */
int bw_attachment_header(bw_buf *out, const char *id, size_t id_len, const char *name,
                         size_t name_len, const char *content_type, size_t content_type_len,
                         uint64_t length);
#endif
