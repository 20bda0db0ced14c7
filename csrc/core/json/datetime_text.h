/* The entity conventions' datetime text, for a Python datetime (the walker) and an Arrow
   timestamp (batch encoding) alike. No Python. */
#ifndef BW_DATETIME_TEXT_H
#define BW_DATETIME_TEXT_H
#include <stddef.h>
#include <stdint.h>

/* Room a caller must reserve before bw_datetime_text; the text is never longer. */
#define BW_DATETIME_TEXT_MAX 32

/* A wall-clock time in the proleptic Gregorian calendar, years 1..9999. */
typedef struct {
    int year, month, day, hour, minute, second, microsecond;
} bw_civil_time;

/* The wall clock `seconds` and `micros` (0..999999) after 1970-01-01T00:00:00. 0, or -1
   when its year is outside datetime's 1..9999 (*t then untouched). */
int bw_civil_time_from_epoch(int64_t seconds, int32_t micros, bw_civil_time *t);

/* Microseconds from 1970-01-01T00:00:00 to t (years 1..9999: always within int64). */
int64_t bw_civil_time_epoch_micros(const bw_civil_time *t);
/* "%Y-%m-%dT%H:%M:%S.%f" and one more digit, quotes included: '0', or '9' for datetime.max
   when naive. The year is not zero-padded, as glibc's strftime writes it. Needs
   BW_DATETIME_TEXT_MAX bytes at dst. Returns the bytes written. */
size_t bw_datetime_text(const bw_civil_time *t, int naive, char *dst);
#endif
