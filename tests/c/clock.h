/* Time for the C unit tests that wait: a monotonic clock in milliseconds, and a sleep that
   signals do not cut short. POSIX (the including file defines _GNU_SOURCE or
   _POSIX_C_SOURCE first). */
#ifndef BW_TEST_CLOCK_H
#define BW_TEST_CLOCK_H
#include <errno.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
#endif
