/* The versions of the libraries linked into this build, as the libraries say them at run
   time (the shared library loaded may be newer than the headers the build saw). */
#ifndef BW_LIB_VERSIONS_H
#define BW_LIB_VERSIONS_H

/* The run-time version of the library `name` ("zlib", "zstd", "openssl"), or NULL when this
   build does not link it or the library has no way to say it at run time (ISA-L: its
   build-time version is what there is). */
const char *bw_runtime_version(const char *name);

#endif
