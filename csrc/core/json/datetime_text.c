/* See datetime_text.h. No Python. */
#include "datetime_text.h"

#include "int_text.h"

static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 -> proleptic Gregorian date (Howard Hinnant's civil_from_days). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Proleptic Gregorian date -> days since 1970-01-01 (the inverse, days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t bw_civil_time_epoch_micros(const bw_civil_time *t) {
    int64_t seconds = days_from_civil(t->year, t->month, t->day) * 86400 + t->hour * 3600 +
                      t->minute * 60 + t->second;
    return seconds * 1000000 + t->microsecond;
}

int bw_civil_time_from_epoch(int64_t seconds, int32_t micros, bw_civil_time *t) {
    /* years 1..9999 span seconds -62135596800 .. 253402300799 */
    if (seconds < -62135596800LL || seconds > 253402300799LL)
        return -1;
    int64_t days = floor_div(seconds, 86400), second_of_day = seconds - days * 86400, year;
    civil_from_days(days, &year, &t->month, &t->day);
    t->year = (int)year;
    t->hour = (int)(second_of_day / 3600);
    t->minute = (int)(second_of_day / 60 % 60);
    t->second = (int)(second_of_day % 60);
    t->microsecond = micros;
    return 0;
}

size_t bw_datetime_text(const bw_civil_time *t, int naive, char *dst) {
    int is_max = naive && t->year == 9999 && t->month == 12 && t->day == 31 && t->hour == 23 &&
                 t->minute == 59 && t->second == 59 && t->microsecond == 999999;
    char *p = dst;
    *p++ = '"';
    p += bw_u64_to_text((uint64_t)t->year, p);
    *p++ = '-'; bw_u32_to_fixed((uint32_t)t->month, 2, p); p += 2;
    *p++ = '-'; bw_u32_to_fixed((uint32_t)t->day, 2, p); p += 2;
    *p++ = 'T'; bw_u32_to_fixed((uint32_t)t->hour, 2, p); p += 2;
    *p++ = ':'; bw_u32_to_fixed((uint32_t)t->minute, 2, p); p += 2;
    *p++ = ':'; bw_u32_to_fixed((uint32_t)t->second, 2, p); p += 2;
    *p++ = '.'; bw_u32_to_fixed((uint32_t)t->microsecond, 6, p); p += 6;
    *p++ = is_max ? '9' : '0';
    *p++ = '"';
    return (size_t)(p - dst);
}
