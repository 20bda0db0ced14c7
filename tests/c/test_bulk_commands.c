/* The counters, time series and attachment commands' bytes, and the calendar's inverse.
   sources: bulk_commands.c json_string.c float_text.c int_text.c out_buffer.c datetime_text.c */
#include <stdint.h>

#include "bulk_commands.h"
#include "check.h"
#include "datetime_text.h"

TEST(counters_command) {
    bw_buf out = {0};
    CHECK(bw_counters_open(&out, "a\"\xc3\xa9", 4) == 0);
    CHECK(bw_counter_increment(&out, 0, "n\\", 2, INT64_MIN) == 0);
    CHECK(bw_counter_increment(&out, 1, "m", 1, 7) == 0);
    CHECK(bw_command_batch_close(&out) == 0);
    CHECK_BYTES(out.data, out.len,
                "{\"Id\":\"a\\\"\xc3\xa9\",\"Type\":\"Counters\",\"Counters\":{\"DocumentId\":"
                "\"a\\\"\xc3\xa9\",\"Operations\":[{\"Type\":\"Increment\",\"CounterName\":\"n\\\\\","
                "\"Delta\":-9223372036854775808},{\"Type\":\"Increment\",\"CounterName\":\"m\","
                "\"Delta\":7}]}}");
    bw_buf_free(&out);
}

TEST(time_series_command) {
    bw_buf out = {0};
    CHECK(bw_time_series_open(&out, "d", 1, "s\n", 2) == 0);
    CHECK(bw_time_series_entry_open(&out, 0, -1, 3) == 0);
    CHECK(bw_time_series_value_double(&out, 0.1) == 0);
    CHECK(bw_time_series_value_int(&out, 42) == 0);
    CHECK(bw_time_series_value_null(&out) == 0);
    CHECK(bw_time_series_entry_close(&out, "t", 1) == 0);
    CHECK(bw_time_series_entry_open(&out, 1, 1704067200000, 1) == 0);
    CHECK(bw_time_series_value_double(&out, 1e16) == 0);
    CHECK(bw_time_series_entry_close(&out, NULL, 0) == 0);
    CHECK(bw_command_batch_close(&out) == 0);
    CHECK_BYTES(out.data, out.len,
                "{\"Id\":\"d\",\"Type\":\"TimeSeriesBulkInsert\",\"TimeSeries\":{\"Name\":\"s\\n\","
                "\"TimeFormat\":\"UnixTimeInMs\",\"Appends\":[[-1,3,0.1,42,null,\"t\"],"
                "[1704067200000,1,1e+16]]}}");
    bw_buf_free(&out);
}

TEST(attachment_header) {
    bw_buf out = {0};
    CHECK(bw_attachment_header(&out, "d", 1, "f", 1, "text/plain", 10, 5) == 0);
    CHECK(bw_attachment_header(&out, "d", 1, "g", 1, "", 0, UINT64_MAX) == 0);
    CHECK(bw_attachment_header(&out, "d", 1, "h", 1, NULL, 0, 0) == 0);
    CHECK_BYTES(out.data, out.len,
                "{\"Id\":\"d\",\"Type\":\"AttachmentPUT\",\"Name\":\"f\",\"ContentType\":\"text/plain\","
                "\"ContentLength\":5}"
                "{\"Id\":\"d\",\"Type\":\"AttachmentPUT\",\"Name\":\"g\",\"ContentLength\":"
                "18446744073709551615}"
                "{\"Id\":\"d\",\"Type\":\"AttachmentPUT\",\"Name\":\"h\",\"ContentLength\":0}");
    bw_buf_free(&out);
}

TEST(epoch_micros_inverts_the_calendar) {
    /* every 97th day over years 1..9999 and the ends, through bw_civil_time_from_epoch */
    for (int64_t seconds = -62135596800LL; seconds <= 253402300799LL; seconds += 97 * 86400 + 3599) {
        bw_civil_time t;
        CHECK(bw_civil_time_from_epoch(seconds, 123456, &t) == 0);
        CHECK_EQ(bw_civil_time_epoch_micros(&t), seconds * 1000000 + 123456);
    }
    bw_civil_time last;
    CHECK(bw_civil_time_from_epoch(253402300799LL, 999999, &last) == 0);
    CHECK_EQ(bw_civil_time_epoch_micros(&last), 253402300799999999LL);
}

RUN_TESTS(counters_command, time_series_command, attachment_header,
          epoch_micros_inverts_the_calendar)
