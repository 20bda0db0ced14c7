/* Which process an object belongs to. fork() copies a process's memory but only the thread
   that called it: in the child, a lock that another thread held stays locked for good, the
   other threads (a sender, compression helpers) do not exist, and sockets and TLS sessions
   are shared with the parent, which goes on using them. An object that owns such things
   records its origin when it is made; in a forked child (bw_origin_inherited) it is neither
   used nor released through them: its memory is the child's own copy, its locks, threads and
   connections are not. Core layer: no Python. */
#ifndef BW_FORK_ORIGIN_H
#define BW_FORK_ORIGIN_H

typedef struct {
    unsigned long generation; /* the forks that led to the recording process */
    long pid;                 /* the recording process (for messages) */
} bw_origin;

/* Records the calling process as the origin. The first call installs the fork handler
   (pthread_atfork) that counts the forks, so it must run before the object exists. */
void bw_origin_record(bw_origin *origin);

/* 1 in a forked child (at any depth) of the process that recorded origin, 0 in that process
   itself. Never blocks; safe from any thread. */
int bw_origin_inherited(const bw_origin *origin);
#endif
