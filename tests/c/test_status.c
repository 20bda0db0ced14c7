/* The one status of the core: set, appended to and cut to fit without ever writing past its
   message; errno statuses; the forked-child message; every kind named; file reads' results
   as statuses (gzip's, zstd's and the CQL connection's are tested in their own files).
   sources: status.c file_read.c */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "file_read.h"
#include "status.h"

TEST(a_cleared_status_is_ok) {
    bw_status st;
    memset(&st, 0x5a, sizeof st);
    bw_status_clear(&st);
    CHECK(bw_status_ok(&st));
    CHECK_EQ(st.kind, BW_STATUS_OK);
    CHECK_EQ(st.sys_errno, 0);
    CHECK_EQ(st.flags, 0);
    CHECK_EQ(st.cut, 0);
    CHECK_EQ(st.message[0], '\0');
}

TEST(set_formats_the_message_and_says_failure) {
    bw_status st;
    CHECK_EQ(bw_status_set(&st, BW_STATUS_MALFORMED, 0, "page %d of %s", 3, "chunk"), -1);
    CHECK(!bw_status_ok(&st));
    CHECK_EQ(st.kind, BW_STATUS_MALFORMED);
    CHECK(strcmp(st.message, "page 3 of chunk") == 0);
    CHECK_EQ(st.cut, 0);
    CHECK_EQ(bw_status_set(&st, BW_STATUS_OK, 0, "%s", ""), 0);
    CHECK(bw_status_ok(&st));
}

TEST(set_clears_what_a_previous_failure_left) {
    bw_status st;
    bw_status_set(&st, BW_STATUS_TLS, 5, "first");
    st.flags = BW_STATUS_VERIFY_FAILED;
    bw_status_set(&st, BW_STATUS_PROTOCOL, 0, "second");
    CHECK_EQ(st.flags, 0);
    CHECK_EQ(st.sys_errno, 0);
    CHECK(strcmp(st.message, "second") == 0);
}

TEST(append_adds_to_the_message) {
    bw_status st;
    bw_status_set(&st, BW_STATUS_CONNECTION_LOST, ECONNRESET, "host:9042: reset");
    bw_status_append(&st, " (row %d)", 7);
    CHECK(strcmp(st.message, "host:9042: reset (row 7)") == 0);
    CHECK_EQ(st.sys_errno, ECONNRESET);
    CHECK_EQ(st.cut, 0);
}

TEST(a_long_message_is_cut_to_fit_and_says_so) {
    static char big[3 * BW_STATUS_MESSAGE_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    bw_status st;
    bw_status_set(&st, BW_STATUS_SERVER, 0, "%s", big);
    CHECK_EQ(strlen(st.message), BW_STATUS_MESSAGE_MAX - 1);
    CHECK_EQ(st.cut, 1);
    bw_status_append(&st, "more");
    CHECK_EQ(strlen(st.message), BW_STATUS_MESSAGE_MAX - 1);
    CHECK_EQ(st.cut, 1);
    /* exactly full: not cut; then one more byte is */
    bw_status_set(&st, BW_STATUS_SERVER, 0, "%.*s", BW_STATUS_MESSAGE_MAX - 2, big);
    CHECK_EQ(st.cut, 0);
    bw_status_append(&st, "y");
    CHECK_EQ(st.cut, 0);
    CHECK_EQ(strlen(st.message), BW_STATUS_MESSAGE_MAX - 1);
    bw_status_append(&st, "z");
    CHECK_EQ(st.cut, 1);
    CHECK_EQ(st.message[BW_STATUS_MESSAGE_MAX - 2], 'y');
}

TEST(errno_statuses) {
    bw_status st;
    CHECK_EQ(bw_status_from_errno(&st, ETIMEDOUT), -1);
    CHECK_EQ(st.kind, BW_STATUS_TIMED_OUT);
    CHECK(strcmp(st.message, "timed out") == 0);
    bw_status_from_errno(&st, EPIPE);
    CHECK_EQ(st.kind, BW_STATUS_OS);
    CHECK_EQ(st.sys_errno, EPIPE);
    CHECK_EQ(st.message[0], '\0'); /* the binding words it from the errno */
}

TEST(the_forked_child_message) {
    bw_status st;
    CHECK_EQ(bw_status_inherited(&st, "this Thing", "its socket"), -1);
    CHECK_EQ(st.kind, BW_STATUS_INHERITED);
    CHECK(strcmp(st.message, "this Thing was made by the process this one was forked from, "
                             "and a forked child cannot use it: its socket belong to that "
                             "process. Make a new one in the child.") == 0);
}

TEST(every_kind_has_its_own_name) {
    for (int a = 0; a < BW_STATUS_KINDS; a++) {
        const char *name = bw_status_kind_name((bw_status_kind)a);
        CHECK(name != NULL && strcmp(name, "unknown") != 0);
        for (int b = 0; b < a; b++)
            CHECK(strcmp(name, bw_status_kind_name((bw_status_kind)b)) != 0);
    }
    CHECK(strcmp(bw_status_kind_name(BW_STATUS_NO_MEMORY), "no_memory") == 0);
    CHECK(strcmp(bw_status_kind_name(BW_STATUS_KINDS), "unknown") == 0);
    CHECK(strcmp(bw_status_kind_name((bw_status_kind)-1), "unknown") == 0);
}

TEST(read_results_map_to_statuses) {
    bw_status st;
    CHECK_EQ(bw_read_status(BW_READ_SHORT, "the file ends at 10", &st), -1);
    CHECK_EQ(st.kind, BW_STATUS_MALFORMED);
    CHECK(strcmp(st.message, "the file ends at 10") == 0);
    bw_read_status(BW_READ_FAILED, "read failed: Bad file descriptor", &st);
    CHECK_EQ(st.kind, BW_STATUS_OS);
    CHECK_EQ(st.sys_errno, 0);
    CHECK(strcmp(st.message, "read failed: Bad file descriptor") == 0);
}

RUN_TESTS(a_cleared_status_is_ok, set_formats_the_message_and_says_failure,
          set_clears_what_a_previous_failure_left, append_adds_to_the_message,
          a_long_message_is_cut_to_fit_and_says_so, errno_statuses, the_forked_child_message,
          every_kind_has_its_own_name, read_results_map_to_statuses)
