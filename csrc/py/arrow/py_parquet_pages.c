/* The binding of csrc/core/parquet/ (parquet_pages.h): a file comes in as a tuple (fd, size),
   read with pread (bulkwire.parquet passes its open descriptor: a file cut short under it gives an
   error, never SIGBUS), or as any object exporting a buffer holding the whole file; arrays go
   out as NumPy arrays. A malformed file raises bulkwire.errors.MalformedFileError (a
   ValueError) with the core's message, a read that fails OSError; the caller names the
   file. */
#define PY_SSIZE_T_CLEAN
#include "py_numpy.h" /* must precede any other NumPy header */
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_pool.h"
#include "file_read.h"
#include "parquet_pages.h"
#include "py_errors.h"
#include "py_file_read.h"
#include "py_parquet_pages.h"

/* Sets the Python exception for a failed result rc of the page reader and its message,
   through the core's one status: out of memory, a read that failed (OSError), else a
   malformed file. Returns NULL. */
static PyObject *raise_pages_error(int rc, const char *error) {
    bw_status st;
    bw_status_set(&st, rc == BW_PAGES_NO_MEMORY     ? BW_STATUS_NO_MEMORY
                       : rc == BW_PAGES_READ_FAILED ? BW_STATUS_OS
                                                    : BW_STATUS_MALFORMED,
                  0, "%s", error);
    return bw_raise_status(&st);
}

/* parquet_index_locations(file, groups, columns) -> int64 array (groups, columns,
   len(PARQUET_CHUNK_FIELDS)): each chunk's fields, named in that order (see
   parquet_pages.h): offset index offset and length (-1 where it has none), codec, dictionary
   page offset (PARQUET_NO_DICTIONARY, PARQUET_DICTIONARY_UNLOCATED), the chunk's start,
   total compressed size and null count (-1: not said).
   New reference. */
static PyObject *module_parquet_index_locations(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* its result is made of arrays */
        return NULL;
    PyObject *file_arg;
    bw_file_arg file;
    Py_ssize_t groups, columns;
    if (!PyArg_ParseTuple(args, "Onn:parquet_index_locations", &file_arg, &groups, &columns) ||
        bw_file_arg_get(file_arg, &file) < 0)
        return NULL;
    PyObject *result = NULL;
    if (groups < 0 || columns < 0 || (columns > 0 && groups > PY_SSIZE_T_MAX / 16 / columns)) {
        PyErr_SetString(PyExc_ValueError, "groups and columns must be small non-negative counts");
        goto cleanup;
    }
    npy_intp dims[3] = {groups, columns, BW_CHUNK_FIELDS};
    result = PyArray_SimpleNew(3, dims, NPY_INT64);
    if (result == NULL)
        goto cleanup;
    char error[BW_PAGES_ERROR_SIZE];
    int64_t *out = PyArray_DATA((PyArrayObject *)result);
    int rc;
    /* only raw memory below: the file (its buffer held by the view, or its descriptor) */
    Py_BEGIN_ALLOW_THREADS
    rc = bw_parquet_index_locations(file.data, file.fd, file.size, (size_t)groups,
                                    (size_t)columns, out, error);
    Py_END_ALLOW_THREADS
    if (rc != BW_PAGES_OK) {
        Py_CLEAR(result);
        raise_pages_error(rc, error);
    }
cleanup:
    bw_file_arg_release(&file);
    return result;
}

/* The page locations as an int64 array (count, 3) of (offset, compressed size, first row).
   New reference. */
static PyObject *locations_array(const bw_page_location *pages, size_t count) {
    npy_intp dims[2] = {(npy_intp)count, 3};
    PyObject *result = PyArray_SimpleNew(2, dims, NPY_INT64);
    if (result == NULL)
        return NULL;
    int64_t *out = PyArray_DATA((PyArrayObject *)result);
    for (size_t i = 0; i < count; i++) {
        out[3 * i] = pages[i].offset;
        out[3 * i + 1] = pages[i].compressed_size;
        out[3 * i + 2] = pages[i].first_row;
    }
    return result;
}

/* parquet_offset_index(file, offset, length, group_rows, chunk_start, chunk_size) -> int64
   array (pages, 3) of (offset, compressed size, first row), each page checked to lie inside
   its column chunk (chunk_start, chunk_size from parquet_index_locations), in order. New
   reference. */
static PyObject *module_parquet_offset_index(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* its result is made of arrays */
        return NULL;
    PyObject *file_arg;
    bw_file_arg file;
    long long offset, length, group_rows, chunk_start, chunk_size;
    if (!PyArg_ParseTuple(args, "OLLLLL:parquet_offset_index", &file_arg, &offset, &length,
                          &group_rows, &chunk_start, &chunk_size) ||
        bw_file_arg_get(file_arg, &file) < 0)
        return NULL;
    PyObject *result = NULL;
    bw_page_location *pages = NULL;
    uint8_t *read = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    if (offset < 0 || length < 0 || (unsigned long long)offset > file.size ||
        (unsigned long long)length > file.size - (unsigned long long)offset) {
        bw_raise_format(BW_ERROR_MALFORMED, "offset index at %lld, %lld bytes, outside the "
                        "file (%zu bytes)", offset, length, file.size);
        goto cleanup;
    }
    const uint8_t *index = file.data != NULL ? file.data + offset : NULL;
    if (index == NULL) { /* read from the descriptor */
        read = malloc(length ? (size_t)length : 1);
        if (read == NULL) {
            PyErr_NoMemory();
            goto cleanup;
        }
        int got;
        Py_BEGIN_ALLOW_THREADS
        got = bw_read_exact(file.fd, read, (size_t)length, (uint64_t)offset, file.size, error,
                            sizeof error);
        Py_END_ALLOW_THREADS
        if (got != BW_READ_OK) {
            bw_raise_read_error(got, error);
            goto cleanup;
        }
        index = read;
    }
    int rc = bw_parquet_offset_index(index, (size_t)length, file.size, chunk_start,
                                     chunk_size, group_rows, &pages, &count, error);
    if (rc != BW_PAGES_OK) {
        raise_pages_error(rc, error);
        goto cleanup;
    }
    result = locations_array(pages, count);
cleanup:
    free(pages);
    free(read);
    bw_file_arg_release(&file);
    return result;
}

/* parquet_walk_pages(file, chunk_start, chunk_size, group_rows, codec, max_rep, list_size,
   null_count) -> int64 array (pages, 3) like parquet_offset_index's, found by walking the
   chunk's page headers; None when its pages are not covered. New reference. */
static PyObject *module_parquet_walk_pages(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* its result is made of arrays */
        return NULL;
    PyObject *file_arg;
    bw_file_arg file;
    long long chunk_start, chunk_size, group_rows, list_size, null_count;
    int codec, max_rep;
    if (!PyArg_ParseTuple(args, "OLLLiiLL:parquet_walk_pages", &file_arg, &chunk_start,
                          &chunk_size, &group_rows, &codec, &max_rep, &list_size, &null_count) ||
        bw_file_arg_get(file_arg, &file) < 0)
        return NULL;
    bw_chunk_walk walk = {
        .file = file.data, .fd = file.fd, .file_size = file.size, .chunk_start = chunk_start,
        .chunk_size = chunk_size, .group_rows = group_rows, .codec = codec,
        .max_rep = max_rep, .list_size = list_size, .null_count = null_count,
    };
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    int rc;
    /* only raw memory below: the file (its buffer held by the view, or its descriptor) */
    Py_BEGIN_ALLOW_THREADS
    rc = bw_parquet_walk_pages(&walk, &pages, &count, error);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc == BW_PAGES_NOT_COVERED)
        result = Py_NewRef(Py_None);
    else if (rc != BW_PAGES_OK)
        raise_pages_error(rc, error);
    else
        result = locations_array(pages, count);
    free(pages);
    bw_file_arg_release(&file);
    return result;
}

/* The capsule's context is the block's capacity when it is a page buffer, NULL when the
   block is malloc'ed memory of its own. */
static void free_capsule_block(PyObject *capsule) {
    void *data = PyCapsule_GetPointer(capsule, "bulkwire.parquet_values");
    size_t page_buffer_capacity = (size_t)(uintptr_t)PyCapsule_GetContext(capsule);
    if (page_buffer_capacity > 0)
        bw_page_buffer_release(data, page_buffer_capacity);
    else
        free(data);
}

/* The block as a 1-D uint8 array of `size` bytes that frees it when the array goes: a page
   buffer of page_buffer_capacity bytes goes back to the page buffer pool (0: a malloc'ed
   block, freed). New reference; the block is freed on failure too. */
static PyObject *array_owning(uint8_t *data, size_t size, size_t page_buffer_capacity) {
    if (data == NULL) {
        data = malloc(1);
        if (data == NULL)
            return PyErr_NoMemory();
        page_buffer_capacity = 0;
    }
    PyObject *capsule = PyCapsule_New(data, "bulkwire.parquet_values", free_capsule_block);
    if (capsule == NULL ||
        PyCapsule_SetContext(capsule, (void *)(uintptr_t)page_buffer_capacity) < 0) {
        if (capsule != NULL)
            Py_DECREF(capsule); /* frees data */
        else if (page_buffer_capacity > 0)
            bw_page_buffer_release(data, page_buffer_capacity);
        else
            free(data);
        return NULL;
    }
    npy_intp dims[1] = {(npy_intp)size};
    PyObject *array = PyArray_SimpleNewFromData(1, dims, NPY_UINT8, data);
    if (array == NULL || PyArray_SetBaseObject((PyArrayObject *)array, capsule) < 0) {
        Py_XDECREF(array);
        Py_DECREF(capsule);
        return NULL;
    }
    return array;
}

/* parquet_dictionary(file, offset, next_page, codec, value_width) -> the dictionary page's
   values as a uint8 array (value_width bytes each), or None when its encoding is not covered.
   next_page: where the chunk's first data page starts (-1: unknown). New reference. */
static PyObject *module_parquet_dictionary(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* its result is made of arrays */
        return NULL;
    PyObject *file_arg;
    bw_file_arg file;
    long long offset, next_page;
    int codec, width;
    if (!PyArg_ParseTuple(args, "OLLii:parquet_dictionary", &file_arg, &offset, &next_page,
                          &codec, &width) ||
        bw_file_arg_get(file_arg, &file) < 0)
        return NULL;
    uint8_t *values = NULL;
    size_t capacity = 0, count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bw_parquet_dictionary(file.data, file.fd, file.size, offset, next_page, codec, width,
                               &values, &capacity, &count, error);
    Py_END_ALLOW_THREADS
    bw_file_arg_release(&file);
    if (rc == BW_PAGES_NOT_COVERED)
        return Py_NewRef(Py_None);
    if (rc != BW_PAGES_OK)
        return raise_pages_error(rc, error);
    if (width == 0) { /* a byte array dictionary: its size from its own count and offsets */
        uint64_t end;
        memcpy(&end, values + 8 + 8 * count, 8);
        return array_owning(values, 8 * (count + 2) + (size_t)end, capacity);
    }
    return array_owning(values, count * (size_t)width, capacity);
}

/* parquet_take_chunk(file, pages, group_rows, codec, value_width, max_rep, max_def,
   list_size, rows, dictionary=None) -> (values as uint8 array, lengths int64 array, pages
   read), or None when the chunk's pages are not covered (the caller reads the row group
   instead). `pages` is what parquet_offset_index returned; `rows` sorted unique int64 of the
   row group; `dictionary` what parquet_dictionary returned for the chunk. New reference. */
static PyObject *module_parquet_take_chunk(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* its result is made of arrays */
        return NULL;
    PyObject *file_arg;
    bw_file_arg file;
    Py_buffer dictionary = {0};
    PyObject *pages_arg, *rows_arg, *dictionary_arg = Py_None;
    long long group_rows, list_size;
    int codec, width, max_rep, max_def;
    if (!PyArg_ParseTuple(args, "OOLiiiiLO|O:parquet_take_chunk", &file_arg, &pages_arg,
                          &group_rows, &codec, &width, &max_rep, &max_def, &list_size,
                          &rows_arg, &dictionary_arg) ||
        bw_file_arg_get(file_arg, &file) < 0)
        return NULL;
    PyObject *result = NULL, *values_array = NULL, *lengths = NULL;
    PyArrayObject *pages_in = NULL, *rows = NULL;
    bw_page_location *pages = NULL;
    bw_bytes values = {NULL, 0, 0};
    char error[BW_PAGES_ERROR_SIZE];
    if (dictionary_arg != Py_None &&
        PyObject_GetBuffer(dictionary_arg, &dictionary, PyBUF_SIMPLE) < 0) {
        dictionary.obj = NULL;
        goto cleanup;
    }
    pages_in = (PyArrayObject *)PyArray_FROMANY(pages_arg, NPY_INT64, 2, 2,
                                                NPY_ARRAY_IN_ARRAY);
    rows = (PyArrayObject *)PyArray_FROMANY(rows_arg, NPY_INT64, 1, 1,
                                            NPY_ARRAY_IN_ARRAY | NPY_ARRAY_ENSURECOPY);
    if (pages_in == NULL || rows == NULL)
        goto cleanup;
    npy_intp page_count = PyArray_DIM(pages_in, 0);
    if (PyArray_DIM(pages_in, 1) != 3) {
        PyErr_SetString(PyExc_ValueError, "pages must have 3 columns");
        goto cleanup;
    }
    pages = malloc((size_t)(page_count ? page_count : 1) * sizeof *pages);
    if (pages == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    const int64_t *in = PyArray_DATA(pages_in);
    for (npy_intp i = 0; i < page_count; i++) {
        /* the same checks as the offset index reader: these numbers may come from anywhere */
        int64_t offset = in[3 * i], size = in[3 * i + 1], first = in[3 * i + 2];
        if (offset < 0 || size <= 0 || size > INT32_MAX || (uint64_t)offset > file.size ||
            (uint64_t)size > file.size - (uint64_t)offset || first >= group_rows ||
            (i == 0 ? first != 0 : first <= in[3 * (i - 1) + 2])) {
            bw_raise_format(BW_ERROR_MALFORMED, "page %zd: bad location", (Py_ssize_t)i);
            goto cleanup;
        }
        pages[i].offset = offset;
        pages[i].compressed_size = (int32_t)size;
        pages[i].first_row = first;
    }
    npy_intp row_count = PyArray_DIM(rows, 0);
    lengths = PyArray_SimpleNew(1, &row_count, NPY_INT64);
    if (lengths == NULL)
        goto cleanup;
    bw_chunk_take request = {
        .file = file.data, .fd = file.fd, .file_size = file.size, .pages = pages,
        .page_count = (size_t)page_count, .group_rows = group_rows, .codec = codec,
        .value_width = width, .max_rep = max_rep, .max_def = max_def, .list_size = list_size,
        .rows = PyArray_DATA(rows), .row_count = (size_t)row_count,
        .dictionary = dictionary.obj != NULL ? dictionary.buf : NULL,
        .dictionary_count = dictionary.obj != NULL && width > 0 ?
                                (size_t)dictionary.len / (size_t)width : 0,
        .dictionary_size = dictionary.obj != NULL ? (size_t)dictionary.len : 0,
    };
    size_t pages_read = 0;
    int rc;
    int64_t *lengths_data = PyArray_DATA((PyArrayObject *)lengths);
    /* only raw memory below: the file (its buffer held by the view, or its descriptor), our
       own copies */
    Py_BEGIN_ALLOW_THREADS
    rc = bw_parquet_take_chunk(&request, &values, lengths_data, &pages_read, error);
    Py_END_ALLOW_THREADS
    if (rc == BW_PAGES_NOT_COVERED) {
        result = Py_NewRef(Py_None);
        goto cleanup;
    }
    if (rc != BW_PAGES_OK) {
        raise_pages_error(rc, error);
        goto cleanup;
    }
    /* exactly their size: the buffer grew by doubling from 4 KiB, and a lookup's result may
       be kept for long (a row from each of many row groups would keep 4 KiB apiece) */
    if (values.capacity > values.size) {
        uint8_t *fit = realloc(values.data, values.size ? values.size : 1);
        if (fit != NULL)
            values.data = fit;
    }
    values_array = array_owning(values.data, values.size, 0);
    values.data = NULL; /* array_owning took it, on failure too */
    if (values_array == NULL)
        goto cleanup;
    result = Py_BuildValue("(OOn)", values_array, lengths, (Py_ssize_t)pages_read);
cleanup:
    free(values.data);
    free(pages);
    Py_XDECREF(values_array);
    Py_XDECREF(lengths);
    Py_XDECREF(pages_in);
    Py_XDECREF(rows);
    if (dictionary.obj != NULL)
        PyBuffer_Release(&dictionary);
    bw_file_arg_release(&file);
    return result;
}

/* ---- zstd pages through a Python decoder, where libzstd is not linked ------------------ */

/* The callable parquet_zstd_decoder set (strong reference; NULL: none). Read and written
   with the GIL held. */
static PyObject *zstd_decoder_callable;

/* bw_zstd_page_decoder through zstd_decoder_callable: called by the page reader without the
   GIL, once per page; takes the GIL, passes a copy of the compressed bytes (the callable may
   keep what it is given) and the size, and copies out what it returns when it is exactly
   out_size bytes. Any exception but MemoryError means the bytes are not such a stream. */
static int zstd_through_python(const uint8_t *in, size_t in_size, uint8_t *out,
                               size_t out_size) {
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = BW_PAGES_MALFORMED;
    Py_buffer plain = {0};
    PyObject *callable = Py_XNewRef(zstd_decoder_callable);
    PyObject *data = NULL, *result = NULL;
    if (callable == NULL || in_size > (size_t)PY_SSIZE_T_MAX || out_size > (size_t)PY_SSIZE_T_MAX)
        goto cleanup;
    data = PyBytes_FromStringAndSize((const char *)in, (Py_ssize_t)in_size); /* new */
    if (data != NULL)
        result = PyObject_CallFunction(callable, "On", data, (Py_ssize_t)out_size); /* new */
    if (result == NULL || PyObject_GetBuffer(result, &plain, PyBUF_SIMPLE) < 0) {
        plain.obj = NULL;
        goto cleanup;
    }
    if ((size_t)plain.len == out_size) {
        memcpy(out, plain.buf, out_size);
        rc = BW_PAGES_OK;
    }
cleanup:
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            rc = BW_PAGES_NO_MEMORY;
        PyErr_Clear();
    }
    if (plain.obj != NULL)
        PyBuffer_Release(&plain);
    Py_XDECREF(result);
    Py_XDECREF(data);
    Py_XDECREF(callable);
    PyGILState_Release(gil);
    return rc;
}

/* parquet_zstd_decoder(decode) -> None: zstd pages are decompressed by decode(data: bytes,
   size: int) -> a bytes-like object of exactly size bytes, once per page, where libzstd is
   not linked (with libzstd it is kept and never called); None removes it. New reference. */
static PyObject *module_parquet_zstd_decoder(PyObject *self, PyObject *decode) {
    (void)self;
    if (decode != Py_None && !PyCallable_Check(decode)) {
        PyErr_Format(PyExc_TypeError, "decode must be callable or None, not %s",
                     Py_TYPE(decode)->tp_name);
        return NULL;
    }
    PyObject *previous = zstd_decoder_callable;
    zstd_decoder_callable = decode == Py_None ? NULL : Py_NewRef(decode);
    bw_parquet_set_zstd_decoder(zstd_decoder_callable != NULL ? zstd_through_python : NULL);
    Py_XDECREF(previous);
    Py_RETURN_NONE;
}

/* parquet_page_buffers(limit=None) -> (buffers, bytes, reused): what the page buffer pool
   holds for the page reader's next pages, and how many buffers it has handed out again;
   limit (bytes) changes how much it may keep from now on (tests). New reference. */
static PyObject *module_parquet_page_buffers(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *limit = Py_None;
    if (!PyArg_ParseTuple(args, "|O:parquet_page_buffers", &limit))
        return NULL;
    if (limit != Py_None) {
        Py_ssize_t bytes = PyNumber_AsSsize_t(limit, PyExc_OverflowError);
        if (bytes == -1 && PyErr_Occurred())
            return NULL;
        if (bytes < 0) {
            PyErr_SetString(PyExc_ValueError, "limit must not be negative");
            return NULL;
        }
        bw_page_buffer_limit((size_t)bytes);
    }
    size_t buffers, bytes, reused;
    bw_page_buffer_stats(&buffers, &bytes, &reused);
    return Py_BuildValue("(nnn)", (Py_ssize_t)buffers, (Py_ssize_t)bytes, (Py_ssize_t)reused);
}

static PyMethodDef parquet_pages_test_hooks[] = {
    {"parquet_page_buffers", module_parquet_page_buffers, METH_VARARGS,
     "parquet_page_buffers(limit=None): (buffers, bytes, reused) of the page buffer pool; "
     "limit: the bytes it may keep from now on."},
    {NULL, NULL, 0, NULL},
};

int bw_parquet_pages_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, parquet_pages_test_hooks);
}

static PyMethodDef parquet_pages_functions[] = {
    {"parquet_zstd_decoder", module_parquet_zstd_decoder, METH_O,
     "parquet_zstd_decoder(decode): where libzstd is not linked, zstd pages are decompressed "
     "by decode(data, size), which returns exactly size bytes; None: no zstd pages."},
    {"parquet_index_locations", module_parquet_index_locations, METH_VARARGS,
     "parquet_index_locations(file, groups, columns): each column chunk's fields, named by "
     "PARQUET_CHUNK_FIELDS in their order: offset index (offset, length; -1 where absent), "
     "codec, dictionary page offset (PARQUET_NO_DICTIONARY, PARQUET_DICTIONARY_UNLOCATED), "
     "chunk start, total compressed size and null count (-1: not said), from the footer."},
    {"parquet_offset_index", module_parquet_offset_index, METH_VARARGS,
     "parquet_offset_index(file, offset, length, group_rows, chunk_start, chunk_size): the "
     "page locations, each inside its column chunk."},
    {"parquet_walk_pages", module_parquet_walk_pages, METH_VARARGS,
     "parquet_walk_pages(file, chunk_start, chunk_size, group_rows, codec, max_rep, list_size, "
     "null_count): the page locations found by walking the chunk's page headers, or None "
     "when not covered."},
    {"parquet_dictionary", module_parquet_dictionary, METH_VARARGS,
     "parquet_dictionary(file, offset, next_page, codec, value_width): the dictionary page's "
     "values, or None when not covered."},
    {"parquet_take_chunk", module_parquet_take_chunk, METH_VARARGS,
     "parquet_take_chunk(file, pages, group_rows, codec, value_width, max_rep, max_def, "
     "list_size, rows, dictionary=None): (values, lengths, pages_read), or None when not covered."},
    {NULL, NULL, 0, NULL},
};

/* The names of a chunk's fields in parquet_index_locations, by their index. */
static const char *const chunk_field_names[BW_CHUNK_FIELDS] = {
    [BW_CHUNK_INDEX_OFFSET] = "index_offset",
    [BW_CHUNK_INDEX_LENGTH] = "index_length",
    [BW_CHUNK_CODEC] = "codec",
    [BW_CHUNK_DICTIONARY] = "dictionary",
    [BW_CHUNK_START] = "start",
    [BW_CHUNK_SIZE] = "size",
    [BW_CHUNK_NULL_COUNT] = "null_count",
};

/* Adds PARQUET_CHUNK_FIELDS, the tuple of chunk_field_names. 0, or -1 with an exception. */
static int add_chunk_fields(PyObject *module) {
    PyObject *names = PyTuple_New(BW_CHUNK_FIELDS); /* new reference */
    if (names == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < BW_CHUNK_FIELDS; i++) {
        PyObject *name = PyUnicode_InternFromString(chunk_field_names[i]);
        if (name == NULL) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    int rc = PyModule_AddObjectRef(module, "PARQUET_CHUNK_FIELDS", names);
    Py_DECREF(names);
    return rc;
}

/* New reference: {number: (name, covered, library or None)} of the core's codec table. */
static PyObject *codec_table(int *snappy_covered) {
    size_t count;
    const bw_parquet_codec *codecs = bw_parquet_codecs(&count);
    PyObject *table = PyDict_New();
    if (table == NULL)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        PyObject *number = PyLong_FromLong(codecs[i].number);
        PyObject *entry = Py_BuildValue("(sOz)", codecs[i].name,
                                        codecs[i].covered ? Py_True : Py_False, codecs[i].library);
        int rc = number == NULL || entry == NULL ? -1 : PyDict_SetItem(table, number, entry);
        Py_XDECREF(number);
        Py_XDECREF(entry);
        if (rc < 0) {
            Py_DECREF(table);
            return NULL;
        }
        if (codecs[i].number == BW_PQ_SNAPPY)
            *snappy_covered = codecs[i].covered;
    }
    return table;
}

int bw_parquet_pages_add_to_module(PyObject *module) {
    int snappy = 0;
    PyObject *table = codec_table(&snappy);
    if (table == NULL)
        return -1;
    int rc = PyModule_AddObjectRef(module, "PARQUET_CODECS", table);
    Py_DECREF(table);
    if (rc < 0 || PyModule_AddFunctions(module, parquet_pages_functions) < 0 ||
        add_chunk_fields(module) < 0 ||
        PyModule_AddIntConstant(module, "PARQUET_NO_DICTIONARY", BW_NO_DICTIONARY) < 0 ||
        PyModule_AddIntConstant(module, "PARQUET_DICTIONARY_UNLOCATED",
                                BW_DICTIONARY_UNLOCATED) < 0 ||
        PyModule_AddIntConstant(module, "HAVE_SNAPPY", snappy) < 0)
        return -1;
    return 0;
}
