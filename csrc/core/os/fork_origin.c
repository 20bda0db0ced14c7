#include "fork_origin.h"

#include <pthread.h>
#include <unistd.h>

/* Written only by the child's fork handler, while the child has no other thread. */
static unsigned long generation;
/* 0 when the handler could not be installed: origins are then told apart by the pid (a
   system call per check instead of a load). */
static int counting;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static void count_fork(void) { generation++; }

static void install_handler(void) { counting = pthread_atfork(NULL, NULL, count_fork) == 0; }

void bw_origin_record(bw_origin *origin) {
    (void)pthread_once(&handler_once, install_handler);
    origin->generation = generation;
    origin->pid = (long)getpid();
}

int bw_origin_inherited(const bw_origin *origin) {
    if (counting)
        return origin->generation != generation;
    return origin->pid != (long)getpid();
}
