/* bulkwire._core's Parquet page reader (binding layer; knows Python). */
#ifndef BW_PY_PARQUET_PAGES_H
#define BW_PY_PARQUET_PAGES_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* Adds parquet_index_locations, parquet_offset_index, parquet_walk_pages, parquet_dictionary,
   parquet_take_chunk, PARQUET_CODECS (the core's codec table: {number: (name, covered, library)}) and HAVE_SNAPPY (read from it;
   whether zstd pages are read is HAVE_ZSTD, the build's one zstd flag).
   0, or -1 with an exception set. */
int bw_parquet_pages_add_to_module(PyObject *module);

/* Adds the test hook parquet_page_buffers (what the page buffer pool keeps; a new limit) to
   bulkwire._core._testing. 0, or -1 with an exception set. */
int bw_parquet_pages_add_test_hooks(PyObject *testing);
#endif
