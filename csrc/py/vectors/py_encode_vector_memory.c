/* Vector encoding: rows read from NumPy or Arrow memory, no Python object per value. */
#include "py_encode_vector.h"

#include "py_arrow.h"

/* The datetime64/timedelta64 dtype a subtype also reads, as int64 values with NaT refused:
   timestamp <- datetime64[ms], date <- datetime64[D] (what deserialize gives for each),
   time <- timedelta64[ns]. Native and swapped byte order. */
enum { DT_TIMESTAMP, DT_DATE, DT_TIME, DT_COUNT };
static PyArray_Descr *dt_native[DT_COUNT], *dt_swapped[DT_COUNT];

static int dt_slot(const bw_subtype *st) {
    switch (st->kind) {
    case BW_V_TIMESTAMP: return DT_TIMESTAMP;
    case BW_V_DATE: return DT_DATE;
    case BW_V_TIME: return DT_TIME;
    default: return -1;
    }
}

/* Makes the dtypes above, once: the first time an array of a datetime subtype is read (the
   NumPy API is then loaded: the caller holds an array). 0, or -1 with an exception. */
static int dt_ready(void) {
    static const char *const specs[DT_COUNT] = {"=M8[ms]", "=M8[D]", "=m8[ns]"};
    PyArray_Descr *native[DT_COUNT] = {NULL}, *swapped[DT_COUNT] = {NULL};
    int rc = -1;
    if (dt_swapped[DT_COUNT - 1] != NULL)
        return 0;
    for (int i = 0; i < DT_COUNT; i++) {
        PyObject *spec = PyUnicode_FromString(specs[i]); /* new reference */
        if (spec == NULL)
            goto cleanup;
        int ok = PyArray_DescrConverter(spec, &native[i]);
        Py_DECREF(spec);
        if (!ok)
            goto cleanup;
        swapped[i] = PyArray_DescrNewByteorder(native[i], NPY_SWAP);
        if (swapped[i] == NULL)
            goto cleanup;
    }
    /* kept unless code run meanwhile (a finalizer reading an array) made them first */
    if (dt_swapped[DT_COUNT - 1] == NULL) {
        for (int i = 0; i < DT_COUNT; i++) {
            dt_native[i] = native[i];
            dt_swapped[i] = swapped[i];
            native[i] = swapped[i] = NULL;
        }
    }
    rc = 0;
cleanup:
    for (int i = 0; i < DT_COUNT; i++) {
        Py_XDECREF(native[i]);
        Py_XDECREF(swapped[i]);
    }
    return rc;
}

static const char *numpy_name(int npy_type) {
    switch (npy_type) {
    case NPY_FLOAT32: return "float32";
    case NPY_FLOAT64: return "float64";
    case NPY_INT8: return "int8";
    case NPY_INT16: return "int16";
    case NPY_INT32: return "int32";
    case NPY_INT64: return "int64";
    case NPY_UINT32: return "uint32";
    default: return "bool";
    }
}

/* Below this many output bytes the GIL is kept: releasing it costs more than it frees. */
#define GIL_RELEASE_BYTES (1 << 20)

/* The driver's element loop widens each float32 to a Python float and packs it back, which
   quiets signaling NaNs (the payload stays). Same here, on big-endian wire floats. */
static void quiet_nans_be32(char *dst, Py_ssize_t n) {
    /* Tests on the big-endian word as loaded: sign+exponent+quiet bit vs exponent only, and
       the rest of the mantissa; branch-free so the loop vectorises. */
#if BW_NATIVE_BIG_ENDIAN
    const uint32_t top = 0x7fc00000u, exp = 0x7f800000u, rest = 0x003fffffu, quiet = 0x00400000u;
#else
    const uint32_t top = 0x0000c07fu, exp = 0x0000807fu, rest = 0xffff3f00u, quiet = 0x00004000u;
#endif
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, dst + 4 * i, 4);
        uint32_t snan = (uint32_t)((u & top) == exp) & (uint32_t)((u & rest) != 0);
        u |= quiet & (0u - snan);
        memcpy(dst + 4 * i, &u, 4);
    }
}

static inline int64_t load_i64(const char *p, int native) {
    uint64_t u;
    memcpy(&u, p, 8);
    return (int64_t)(native ? u : __builtin_bswap64(u));
}

/* The rule the sequence path applies per element (item_to_int, none_error), over values in
   memory: NaT is a null, integers outside the subtype's range are refused, with the same
   exception and message as for the equivalent Python int. Only 8-byte integer sources can
   hold such values: NumPy's safe casting already bounds the narrower ones to the subtype's
   type. Rows [0, rows); errors name the row (first_row + r) when name_rows. 0, or -1. */
int bw_vec_check_source(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                        Py_ssize_t first_row, int name_rows) {
    const bw_subtype *st = c->st;
    if ((st->npy_kind != 'i' && st->npy_kind != 'u') || s->src_width != 8)
        return 0;
    /* [lo, hi] in source units; the offsets in use keep these in range */
    long long lo = st->lo - s->offset, hi = st->hi - s->offset;
    if (!s->nat && lo == INT64_MIN && hi == INT64_MAX)
        return 0;
    int native = s->swap != BW_NATIVE_BIG_ENDIAN;
    for (Py_ssize_t r = 0; r < rows; r++) {
        const char *row = bw_row_ptr(s, r);
        /* branch-free over the row; the element is looked for only when the row has one */
        int bad = 0;
        for (Py_ssize_t i = 0; i < c->dim; i++) {
            int64_t v = load_i64(row + i * s->elem_stride, native);
            bad |= (v < lo) | (v > hi) | (s->nat & (v == INT64_MIN));
        }
        if (!bad)
            continue;
        for (Py_ssize_t i = 0; i < c->dim; i++) {
            int64_t v = load_i64(row + i * s->elem_stride, native);
            if (s->nat && v == INT64_MIN) {
                bw_vec_null_error(i, "NaT");
            } else if (v < lo || v > hi) {
                PyObject *value = PyLong_FromLongLong(v); /* new reference */
                PyObject *offset = value ? PyLong_FromLongLong(s->offset) : NULL;
                PyObject *wire = offset ? PyNumber_Add(value, offset) : NULL;
                if (wire != NULL)
                    bw_vec_range_error(c, i, wire);
                Py_XDECREF(wire);
                Py_XDECREF(offset);
                Py_XDECREF(value);
            } else {
                continue;
            }
            if (name_rows)
                bw_vec_prefix_row(first_row + r, 1);
            return -1;
        }
    }
    return 0;
}

/* One row of a numeric kind: no Python, may run without the GIL. */
void bw_vec_fill_row(const bw_vector_codec *c, const bw_row_source *s, const char *src,
                     char *dst) {
    const bw_subtype *st = c->st;
    if (st->prefixed) {
        bw_fill_strided(dst, c->elem_size, (size_t)c->dim, (unsigned char)st->width);
        dst++;
    }
    if (st->kind == BW_V_BOOL) {
        /* NumPy reads any non-zero byte of a bool array as True (tolist(), casts): the wire
           gets the driver's byte for True */
        for (Py_ssize_t i = 0; i < c->dim; i++)
            dst[i] = src[i * s->elem_stride] != 0;
        return;
    }
    if (st->kind == BW_V_DATE && s->src_width == 8) {
        /* datetime64[D] days, checked by bw_vec_check_source, to the raw value (epoch at 2**31) */
        int native = s->swap != BW_NATIVE_BIG_ENDIAN;
        for (Py_ssize_t i = 0; i < c->dim; i++) {
            int64_t days = load_i64(src + i * s->elem_stride, native);
            store_be32(dst + i * c->elem_size, (uint32_t)((uint64_t)days + (uint64_t)s->offset));
        }
        return;
    }
    if (s->src_width == st->width) {
        bw_copy_elements(dst, c->elem_size, src, s->elem_stride, (size_t)c->dim, (size_t)st->width,
                         s->swap);
        if (c->driver_compat && st->kind == BW_V_F32)
            quiet_nans_be32(dst, c->dim);
        return;
    }
    /* float32 widened to a big-endian double: exact. The source is in native order when
       its "not big-endian" flag differs from the machine's big-endianness. */
    int native = s->swap != BW_NATIVE_BIG_ENDIAN;
    for (Py_ssize_t i = 0; i < c->dim; i++) {
        uint32_t fbits;
        memcpy(&fbits, src + i * s->elem_stride, 4);
        if (!native)
            fbits = __builtin_bswap32(fbits);
        float f;
        memcpy(&f, &fbits, 4);
        double d = (double)f;
        uint64_t bits;
        memcpy(&bits, &d, 8);
        store_be64(dst + i * 8, bits);
    }
}

static void fill_rows(const bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                      char *const *dsts, char *dst0) {
    for (Py_ssize_t r = 0; r < rows; r++)
        bw_vec_fill_row(c, s, bw_row_ptr(s, r), dsts ? dsts[r] : dst0 + r * c->row_size);
}

/* Appends `rows` new bytes objects filled from s to list. 0, or -1 with an exception. */
int bw_vec_emit_rows_list(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                          PyObject *list) {
    int rc = -1;
    char **dsts = PyMem_Malloc(sizeof(char *) * (size_t)(rows > 0 ? rows : 1));
    if (dsts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    /* Small batches: fill each row while its fresh memory is still in cache, GIL held. */
    int release = (size_t)rows * (size_t)c->row_size >= GIL_RELEASE_BYTES;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, c->row_size); /* new reference */
        if (b == NULL)
            goto cleanup;
        dsts[r] = PyBytes_AS_STRING(b);
        if (!release)
            bw_vec_fill_row(c, s, bw_row_ptr(s, r), dsts[r]);
        int appended = PyList_Append(list, b);
        Py_DECREF(b); /* the list holds it */
        if (appended < 0)
            goto cleanup;
    }
    /* The new bytes objects are reachable only from our list; the source stays referenced. */
    if (release) {
        Py_BEGIN_ALLOW_THREADS
        fill_rows(c, s, rows, dsts, NULL);
        Py_END_ALLOW_THREADS
    }
    rc = 0;
cleanup:
    PyMem_Free(dsts);
    return rc;
}

/* Grows the bytearray by `rows` rows filled from s. 0, or -1 with an exception. */
int bw_vec_emit_rows_into(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                          PyObject *bytearray) {
    Py_ssize_t old = PyByteArray_GET_SIZE(bytearray);
    if (rows > (PY_SSIZE_T_MAX - old) / (c->row_size ? c->row_size : 1)) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(bytearray, old + rows * c->row_size) < 0)
        return -1;
    char *dst = PyByteArray_AS_STRING(bytearray) + old;
    bw_advise_huge_pages(dst, (size_t)rows * (size_t)c->row_size); /* before the first touch */
    if ((size_t)rows * (size_t)c->row_size >= GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS /* the bytearray is ours alone until returned */
        fill_rows(c, s, rows, NULL, dst);
        Py_END_ALLOW_THREADS
    } else {
        fill_rows(c, s, rows, NULL, dst);
    }
    return 0;
}

/* A new reference to arr itself when its dtype is the subtype's (any byte order) or one it
   reads directly (float32 for double, the datetime dtype for its subtype: *nat set), or to a
   copy cast under NumPy's "safe" rule; NULL with a TypeError when that rule forbids it. */
static PyArrayObject *numeric_array(bw_vector_codec *c, PyArrayObject *arr, int *nat) {
    const bw_subtype *st = c->st;
    PyArray_Descr *d = PyArray_DESCR(arr);
    *nat = 0;
    if (d->kind == st->npy_kind && PyDataType_ELSIZE(d) == st->width)
        return (PyArrayObject *)Py_NewRef(arr);
    if (st->kind == BW_V_F64 && d->kind == 'f' && PyDataType_ELSIZE(d) == 4)
        return (PyArrayObject *)Py_NewRef(arr); /* widened in bw_vec_fill_row, no temporary */
    int slot = dt_slot(st);
    if (slot >= 0 && dt_ready() < 0)
        return NULL;
    if (slot >= 0 && (PyArray_EquivTypes(d, dt_native[slot]) ||
                      PyArray_EquivTypes(d, dt_swapped[slot]))) {
        *nat = 1;
        return (PyArrayObject *)Py_NewRef(arr);
    }
    PyArray_Descr *target = PyArray_DescrFromType(st->npy_type); /* new reference */
    if (target == NULL)
        return NULL;
    if (!PyArray_CanCastTypeTo(d, target, NPY_SAFE_CASTING)) {
        static const char *const dt_hint[DT_COUNT] = {
            " or arr.astype('datetime64[ms]')", " or arr.astype('datetime64[D]')",
            " or arr.astype('timedelta64[ns]')"};
        Py_DECREF(target);
        PyErr_Format(PyExc_TypeError, "cannot cast an array of dtype %S to %s (%s) under "
                     "NumPy's 'safe' casting rule; cast it explicitly if the loss is acceptable, "
                     "e.g. arr.astype(numpy.%s)%s", (PyObject *)d, st->name,
                     numpy_name(st->npy_type), numpy_name(st->npy_type),
                     slot >= 0 ? dt_hint[slot] : "");
        return NULL;
    }
    return (PyArrayObject *)PyArray_CastToType(arr, target, 0); /* steals target */
}

static int array_swap(const bw_vector_codec *c, PyArrayObject *arr) {
    if (c->st->width == 1)
        return 0;
    return BW_NATIVE_BIG_ENDIAN ? PyArray_ISBYTESWAPPED(arr) : !PyArray_ISBYTESWAPPED(arr);
}

/* The values of a 1-D (one row) or 2-D array as a bw_row_source over *held, a new reference to
   arr or to its safe cast that the caller releases. 0, or -1 with a TypeError. */
int bw_vec_array_source(bw_vector_codec *c, PyArrayObject *arr, bw_row_source *s,
                        PyArrayObject **held) {
    int nat;
    PyArrayObject *src = numeric_array(c, arr, &nat); /* new reference */
    if (src == NULL)
        return -1;
    int two_d = PyArray_NDIM(src) == 2;
    *s = (bw_row_source){.base = PyArray_BYTES(src),
                         .row_stride = two_d ? PyArray_STRIDE(src, 0) : 0,
                         .elem_stride = PyArray_STRIDE(src, two_d),
                         .src_width = (int)PyArray_ITEMSIZE(src), .swap = array_swap(c, src),
                         .nat = nat, .offset = nat && c->st->kind == BW_V_DATE ? (1LL << 31) : 0};
    *held = src;
    return 0;
}

PyObject *bw_vec_shape_error(PyArrayObject *arr, const char *expected, Py_ssize_t dim) {
    PyObject *shape = PyObject_GetAttrString((PyObject *)arr, "shape"); /* new reference */
    if (shape == NULL)
        return NULL;
    PyErr_Format(PyExc_ValueError, "expected %s array of shape %s%zd%s, got an array of shape %S",
                 expected[0] == '1' ? "a 1-D" : "a 2-D", expected[0] == '1' ? "(" : "(rows, ",
                 dim, expected[0] == '1' ? ",)" : ")", shape);
    Py_DECREF(shape);
    return NULL;
}

/* See py_encode_vector.h: the one reader of Arrow vectors, batch by batch. */
int bw_vec_arrow_rows(bw_vector_codec *c, PyObject *obj, const bw_vec_arrow_reader *reader,
                      void *ctx) {
    bw_arrow_source src;
    if (bw_arrow_source_open(obj, &src) < 0)
        return -1;
    int rc;
    int64_t base_row = 0;
    char err[200];
    while ((rc = bw_arrow_source_next(&src)) == 1) {
        bw_arrow_vectors v;
        if (bw_arrow_vectors_view(&src.schema, &src.array, &v, err, sizeof err) < 0) {
            PyErr_SetString(PyExc_TypeError, err);
            rc = -1;
            break;
        }
        if (reader->refuse != NULL && reader->refuse(c, &v) < 0) {
            rc = -1;
            break;
        }
        int64_t bad_row = 0, bad_len = 0;
        bw_arrow_row_problem why = BW_ARROW_ROW_OK;
        if (bw_arrow_vectors_check(&v, c->dim, &bad_row, &why, &bad_len) < 0) {
            reader->row_error(c, bad_row + base_row, why, bad_len);
            rc = -1;
            break;
        }
        if (v.length > 0 && v.values == NULL) {
            PyErr_SetString(PyExc_ValueError, "malformed Arrow array: no values buffer");
            rc = -1;
            break;
        }
        bw_row_source s = {.arrow = &v, .elem_stride = v.value_width, .src_width = v.value_width,
                           .swap = !BW_NATIVE_BIG_ENDIAN}; /* Arrow memory is native order */
        if (reader->emit(ctx, c, &s, (Py_ssize_t)v.length, (Py_ssize_t)base_row) < 0) {
            rc = -1;
            break;
        }
        base_row += v.length;
    }
    bw_arrow_source_close(&src);
    return rc < 0 ? -1 : 0;
}
