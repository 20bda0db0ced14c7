/* Run-time versions of the linked libraries: see lib_versions.h. */
#include "lib_versions.h"

#include <string.h>
#include <zlib.h>

#ifdef BW_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef BW_HAVE_OPENSSL
#include <openssl/crypto.h>
#endif

const char *bw_runtime_version(const char *name) {
    if (strcmp(name, "zlib") == 0)
        return zlibVersion();
#ifdef BW_HAVE_ZSTD
    if (strcmp(name, "zstd") == 0)
        return ZSTD_versionString();
#endif
#ifdef BW_HAVE_OPENSSL
    if (strcmp(name, "openssl") == 0)
        return OpenSSL_version(OPENSSL_VERSION);
#endif
    return NULL;
}
