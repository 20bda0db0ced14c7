/* Running a function in a forked child with a deadline, for the tests of what a forked child
   may do with what it inherited: a child that hangs (on a lock held by a thread it does not
   have, on a thread it would join) is killed and counted as failed, never waited for.
   Include after defining _POSIX_C_SOURCE. */
#ifndef BW_FORK_CHILD_H
#define BW_FORK_CHILD_H
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Runs fn(arg) in a forked child, which ends with _exit(fn's result). The child's exit
   status (0..255); -1 when it died of a signal, or did not end within timeout_ms (it is then
   killed); -2 when fork failed. */
static inline int run_in_child(int (*fn)(void *), void *arg, long timeout_ms) {
    pid_t pid = fork();
    if (pid < 0)
        return -2;
    if (pid == 0)
        _exit(fn(arg));
    struct timespec step = {0, 1000000L}; /* 1 ms */
    for (long waited = 0; waited <= timeout_ms; waited++) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        nanosleep(&step, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}
#endif
