/* Datetime text: the calendar from epoch seconds, the year range, and datetime.max's digit.
   sources: datetime_text.c int_text.c */
#include <stdint.h>

#include "check.h"
#include "datetime_text.h"

static size_t text_of(int64_t seconds, int32_t micros, int naive, char *dst) {
    bw_civil_time t;
    if (bw_civil_time_from_epoch(seconds, micros, &t) < 0)
        return 0;
    return bw_datetime_text(&t, naive, dst);
}

TEST(calendar_and_layout) {
    char text[BW_DATETIME_TEXT_MAX];
    size_t n = text_of(0, 0, 1, text);
    CHECK_BYTES(text, n, "\"1970-01-01T00:00:00.0000000\"");
    n = text_of(-1, 999999, 1, text);
    CHECK_BYTES(text, n, "\"1969-12-31T23:59:59.9999990\"");
    n = text_of(951782400, 5, 1, text); /* 2000-02-29, a leap day of a century year */
    CHECK_BYTES(text, n, "\"2000-02-29T00:00:00.0000050\"");
    n = text_of(-62135596800LL, 0, 1, text); /* the first second of year 1: no zero padding */
    CHECK_BYTES(text, n, "\"1-01-01T00:00:00.0000000\"");
}

TEST(datetime_max_only_when_naive) {
    char text[BW_DATETIME_TEXT_MAX];
    size_t n = text_of(253402300799LL, 999999, 1, text);
    CHECK_BYTES(text, n, "\"9999-12-31T23:59:59.9999999\"");
    CHECK(n <= BW_DATETIME_TEXT_MAX);
    n = text_of(253402300799LL, 999999, 0, text);
    CHECK_BYTES(text, n, "\"9999-12-31T23:59:59.9999990\"");
}

TEST(years_outside_1_to_9999_are_refused) {
    bw_civil_time t = {0};
    CHECK_EQ(bw_civil_time_from_epoch(253402300800LL, 0, &t), -1);
    CHECK_EQ(bw_civil_time_from_epoch(-62135596801LL, 0, &t), -1);
    CHECK_EQ(t.year, 0); /* untouched */
}

RUN_TESTS(calendar_and_layout, datetime_max_only_when_naive, years_outside_1_to_9999_are_refused)
