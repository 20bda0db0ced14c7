/* A minimal unit test harness for the C core: no Python, no framework.

   Each test file lists the core sources it links in a "sources:" comment line (and extra
   libraries in a "libs:" line) that tests/c/run.py reads, defines TEST(name) functions and
   ends with RUN_TESTS(name, name, ...). Every test prints "ok <name>" or "FAIL <name>" and
   the binary's last line is "result: <passed> <failed>", which the runner adds up; a binary
   that dies before that line (a sanitizer report, a signal) counts as failed. */
#ifndef BW_CHECK_H
#define BW_CHECK_H
#include <stdio.h>
#include <string.h>

static int check_failures; /* failed checks in the test running now */

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            check_failures++;                                                         \
        }                                                                             \
    } while (0)

/* Integers compared as long long, both values printed on failure. */
#define CHECK_EQ(a, b)                                                                 \
    do {                                                                               \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                \
        if (check_a_ != check_b_) {                                                    \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n",        \
                    __FILE__, __LINE__, #a, check_a_, #b, check_b_);                   \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

/* n bytes at p against a NUL-ended expectation. */
#define CHECK_BYTES(p, n, want)                                                        \
    do {                                                                               \
        const char *check_want_ = (want);                                              \
        size_t check_n_ = (size_t)(n);                                                 \
        if (check_n_ != strlen(check_want_) || memcmp((p), check_want_, check_n_) != 0) { \
            fprintf(stderr, "%s:%d: CHECK_BYTES failed: got \"%.*s\", want \"%s\"\n",  \
                    __FILE__, __LINE__, (int)check_n_, (const char *)(p), check_want_); \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

typedef void (*check_test_fn)(void);

static int check_run_all(const char *const *names, const check_test_fn *tests, size_t n) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        check_failures = 0;
        tests[i]();
        if (check_failures == 0) {
            printf("ok %s\n", names[i]);
            passed++;
        } else {
            printf("FAIL %s (%d checks)\n", names[i], check_failures);
            failed++;
        }
        fflush(stdout);
    }
    printf("result: %d %d\n", passed, failed);
    return failed != 0;
}

#define CHECK_STRINGIFY_EACH_(...) #__VA_ARGS__

/* main(): runs the listed tests in order. */
#define RUN_TESTS(...)                                                                 \
    int main(void) {                                                                   \
        static const check_test_fn tests[] = {__VA_ARGS__};                            \
        static char names_text[] = CHECK_STRINGIFY_EACH_(__VA_ARGS__);                 \
        const char *names[sizeof tests / sizeof tests[0]];                             \
        char *p = names_text;                                                          \
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {                  \
            while (*p == ' ')                                                          \
                p++;                                                                   \
            names[i] = p;                                                              \
            while (*p != ',' && *p != '\0')                                            \
                p++;                                                                   \
            if (*p == ',')                                                             \
                *p++ = '\0';                                                           \
        }                                                                              \
        return check_run_all(names, tests, sizeof tests / sizeof tests[0]);            \
    }

/* A small deterministic generator (xorshift64*), so failures reproduce. */
static inline unsigned long long check_rand(unsigned long long *state) {
    unsigned long long x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}
#endif
