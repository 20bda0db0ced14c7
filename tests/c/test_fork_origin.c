/* The process an object belongs to: the process that recorded an origin owns it, its forked
   children (and theirs) inherit it, and an origin recorded in a child is that child's.
   sources: fork_origin.c
   libs: -lpthread */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "fork_child.h"
#include "fork_origin.h"

static bw_origin parent_origin;

/* In a grandchild: both the parent's origin and the child's are inherited. */
static int grandchild(void *child_origin) {
    return bw_origin_inherited(&parent_origin) && bw_origin_inherited(child_origin) ? 0 : 1;
}

/* In a child: the parent's origin is inherited, the child's own is not, and both are in the
   child's child. */
static int child(void *unused) {
    (void)unused;
    if (!bw_origin_inherited(&parent_origin))
        return 1;
    bw_origin own;
    bw_origin_record(&own);
    if (bw_origin_inherited(&own) || own.pid != (long)getpid())
        return 2;
    return run_in_child(grandchild, &own, 10000) == 0 ? 0 : 3;
}

TEST(an_origin_is_inherited_by_forked_children_only) {
    bw_origin_record(&parent_origin);
    CHECK(!bw_origin_inherited(&parent_origin));
    CHECK_EQ(parent_origin.pid, (long)getpid());
    CHECK_EQ(run_in_child(child, NULL, 10000), 0);
    CHECK(!bw_origin_inherited(&parent_origin)); /* the parent still owns it */
}

RUN_TESTS(an_origin_is_inherited_by_forked_children_only)
