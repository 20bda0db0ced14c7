/* See status.h. */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bw_status_clear(bw_status *st) {
    st->kind = BW_STATUS_OK;
    st->sys_errno = 0;
    st->flags = 0;
    st->cut = 0;
    st->message[0] = '\0';
}

int bw_status_ok(const bw_status *st) {
    return st->kind == BW_STATUS_OK;
}

/* Writes at offset `at` of the message as vsnprintf does, marking a cut. */
static void message_write(bw_status *st, size_t at, const char *format, va_list args) {
    if (at >= sizeof st->message - 1) {
        if (format[0] != '\0')
            st->cut = 1;
        return;
    }
    int n = vsnprintf(st->message + at, sizeof st->message - at, format, args);
    if (n < 0) { /* an encoding error: keep what was there */
        st->message[at] = '\0';
        return;
    }
    if ((size_t)n >= sizeof st->message - at)
        st->cut = 1;
}

int bw_status_set(bw_status *st, bw_status_kind kind, int sys_errno, const char *format, ...) {
    bw_status_clear(st);
    st->kind = kind;
    st->sys_errno = sys_errno;
    va_list args;
    va_start(args, format);
    message_write(st, 0, format, args);
    va_end(args);
    return kind == BW_STATUS_OK ? 0 : -1;
}

void bw_status_append(bw_status *st, const char *format, ...) {
    va_list args;
    va_start(args, format);
    message_write(st, strlen(st->message), format, args);
    va_end(args);
}

int bw_status_from_errno(bw_status *st, int sys_errno) {
    if (sys_errno == ETIMEDOUT)
        return bw_status_set(st, BW_STATUS_TIMED_OUT, sys_errno, "timed out");
    return bw_status_set(st, BW_STATUS_OS, sys_errno, "%s", "");
}

int bw_status_inherited(bw_status *st, const char *what, const char *owned) {
    return bw_status_set(st, BW_STATUS_INHERITED, 0,
                         "%s was made by the process this one was forked from, and a forked "
                         "child cannot use it: %s belong to that process. Make a new one in "
                         "the child.", what, owned);
}

const char *bw_status_kind_name(bw_status_kind kind) {
    static const char *const names[BW_STATUS_KINDS] = {
        [BW_STATUS_OK] = "ok",
        [BW_STATUS_NO_MEMORY] = "no_memory",
        [BW_STATUS_OS] = "os",
        [BW_STATUS_TIMED_OUT] = "timed_out",
        [BW_STATUS_FAILED] = "failed",
        [BW_STATUS_INHERITED] = "inherited",
        [BW_STATUS_INVALID] = "invalid",
        [BW_STATUS_MALFORMED] = "malformed",
        [BW_STATUS_TLS] = "tls",
        [BW_STATUS_CONNECT] = "connect",
        [BW_STATUS_TLS_SESSION] = "tls_session",
        [BW_STATUS_CONNECTION_LOST] = "connection_lost",
        [BW_STATUS_TIMEOUT] = "timeout",
        [BW_STATUS_PROTOCOL] = "protocol",
        [BW_STATUS_SERVER] = "server",
    };
    if ((unsigned)kind >= BW_STATUS_KINDS)
        return "unknown";
    return names[kind];
}
