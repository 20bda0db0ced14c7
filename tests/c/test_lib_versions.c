/* The run-time versions of the linked libraries: zlib's is the one its header names (the
   same major.minor), a library this build does not link has none, and an unknown name has
   none.
   sources: lib_versions.c
   libs: -lz */
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "lib_versions.h"

TEST(zlib_says_its_version) {
    const char *version = bw_runtime_version("zlib");
    CHECK(version != NULL);
    if (version != NULL)
        CHECK(strncmp(version, ZLIB_VERSION, 3) == 0);
}

TEST(unlinked_and_unknown_libraries_have_none) {
    /* built here without -DBW_HAVE_ZSTD / -DBW_HAVE_OPENSSL */
    CHECK(bw_runtime_version("zstd") == NULL);
    CHECK(bw_runtime_version("openssl") == NULL);
    CHECK(bw_runtime_version("isal") == NULL);
    CHECK(bw_runtime_version("no such library") == NULL);
}

RUN_TESTS(zlib_says_its_version, unlinked_and_unknown_libraries_have_none)
