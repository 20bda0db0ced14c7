/* Python sequences, NumPy arrays and Arrow vector columns -> CQL vector<T, N> payloads. */
#include "py_vector_codec.h"

#include <float.h>
#include <math.h>

#include "byteswap.h"
#include "json_array.h"
#include "py_arrow.h"
#include "vint.h"

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

int bw_vec_encode_init(void) {
    static const char *const specs[DT_COUNT] = {"=M8[ms]", "=M8[D]", "=m8[ns]"};
    for (int i = 0; i < DT_COUNT; i++) {
        PyObject *spec = PyUnicode_FromString(specs[i]);
        if (spec == NULL)
            return -1;
        int ok = PyArray_DescrConverter(spec, &dt_native[i]);
        Py_DECREF(spec);
        if (!ok)
            return -1;
        dt_swapped[i] = PyArray_DescrNewByteorder(dt_native[i], NPY_SWAP);
        if (dt_swapped[i] == NULL)
            return -1;
    }
    return 0;
}

/* ---- errors ---------------------------------------------------------------------------- */

static PyObject *length_error(bw_vector_codec *c, Py_ssize_t observed) {
    /* the driver's wording */
    PyErr_Format(PyExc_ValueError, "Expected sequence of size %zd for vector of type %s and "
                 "dimension %zd, observed sequence of length %zd", c->dim, c->st->name, c->dim,
                 observed);
    return NULL;
}

/* A null element: None in a sequence, NaT in a datetime64/timedelta64 array. */
static int null_error(Py_ssize_t index, const char *null_name) {
    PyErr_Format(PyExc_TypeError, "vector element %zd is %s: CQL vectors cannot hold nulls",
                 index, null_name);
    return -1;
}

static int none_error(Py_ssize_t index) { return null_error(index, "None"); }

static int range_error(bw_vector_codec *c, Py_ssize_t index, PyObject *item) {
    PyErr_Format(PyExc_OverflowError, "vector element %zd (%R) is out of range for %s", index,
                 item, c->st->name);
    return -1;
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

/* ---- one element from a Python object ---------------------------------------------------- */

static inline void store_be32(char *dst, uint32_t v) {
#if !BW_NATIVE_BIG_ENDIAN
    v = __builtin_bswap32(v);
#endif
    memcpy(dst, &v, 4);
}

static inline void store_be64(char *dst, uint64_t v) {
#if !BW_NATIVE_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    memcpy(dst, &v, 8);
}

/* float32 rounding with Python's struct rule: finite values that round past FLT_MAX overflow.
   Done without the undefined out-of-range conversion. 0, or -1 when it overflows. */
static inline int double_to_float(double d, float *out) {
    if (isfinite(d) && fabs(d) >= 0x1.ffffffp127)
        return -1;
    *out = (float)d;
    return 0;
}

static int item_to_double(PyObject *item, Py_ssize_t index, double *out) {
    if (PyFloat_CheckExact(item)) {
        *out = PyFloat_AS_DOUBLE(item);
        return 0;
    }
    if (item == Py_None)
        return none_error(index);
    double d = PyFloat_AsDouble(item);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    *out = d;
    return 0;
}

/* Integer value of item, within the subtype's range. exact: only int itself (the driver's
   timestamp); plain: int and subclasses only (the driver's date); else anything with
   __index__. */
enum { INT_INDEX, INT_PLAIN, INT_EXACT };
static int item_to_int(bw_vector_codec *c, PyObject *item, Py_ssize_t index, int rule,
                       long long *out) {
    if (item == Py_None)
        return none_error(index);
    PyObject *number;
    if (PyLong_CheckExact(item) || (rule != INT_EXACT && PyLong_Check(item))) {
        number = Py_NewRef(item);
    } else if (rule == INT_INDEX) {
        number = PyNumber_Index(item); /* new reference */
        if (number == NULL)
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "vector element %zd: expected an int for %s, got %.80s",
                     index, c->st->name, Py_TYPE(item)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
    Py_DECREF(number);
    if (v == -1 && !overflow && PyErr_Occurred())
        return -1;
    if (overflow || !bw_subtype_holds(c->st, v))
        return range_error(c, index, item);
    *out = v;
    return 0;
}

/* Writes element `index` of a constant-size kind at dst (elem_size bytes, prefix included). */
static int put_fixed_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, char *dst) {
    const bw_subtype *st = c->st;
    long long v;
    if (st->prefixed)
        *dst++ = (char)st->width;
    switch (st->kind) {
    case BW_V_F32: {
        double d;
        float f;
        uint32_t bits;
        if (item_to_double(item, index, &d) < 0)
            return -1;
        if (double_to_float(d, &f) < 0)
            return range_error(c, index, item);
        memcpy(&bits, &f, 4);
        store_be32(dst, bits);
        return 0;
    }
    case BW_V_F64: {
        double d;
        uint64_t bits;
        if (item_to_double(item, index, &d) < 0)
            return -1;
        memcpy(&bits, &d, 8);
        store_be64(dst, bits);
        return 0;
    }
    case BW_V_I8:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        *dst = (char)(int8_t)v;
        return 0;
    case BW_V_I16: {
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        uint16_t u = (uint16_t)(int16_t)v;
        dst[0] = (char)(u >> 8);
        dst[1] = (char)(u & 0xff);
        return 0;
    }
    case BW_V_I32:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        store_be32(dst, (uint32_t)(int32_t)v);
        return 0;
    case BW_V_I64:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_TIMESTAMP:
        if (item_to_int(c, item, index, INT_EXACT, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_DATE:
        if (item_to_int(c, item, index, INT_PLAIN, &v) < 0)
            return -1;
        store_be32(dst, (uint32_t)v);
        return 0;
    case BW_V_TIME:
        if (item_to_int(c, item, index, INT_PLAIN, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_BOOL:
        if (item == Py_True || item == Py_False) {
            *dst = item == Py_True;
            return 0;
        }
        if (item == Py_None)
            return none_error(index);
        PyErr_Format(PyExc_TypeError, "vector element %zd: expected a bool for boolean, got "
                     "%.80s", index, Py_TYPE(item)->tp_name);
        return -1;
    case BW_V_UUID: {
        if (item == Py_None)
            return none_error(index);
        PyObject *raw = PyObject_GetAttrString(item, "bytes"); /* new reference */
        if (raw == NULL || !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16) {
            Py_XDECREF(raw);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected a uuid.UUID for %s, got "
                         "%.80s", index, st->name, Py_TYPE(item)->tp_name);
            return -1;
        }
        memcpy(dst, PyBytes_AS_STRING(raw), 16);
        Py_DECREF(raw);
        return 0;
    }
    default:
        PyErr_SetString(PyExc_SystemError, "bulkwire: not a constant-size vector subtype");
        return -1;
    }
}

/* Variable-size elements: vint length + content, appended to out. */
static int put_var_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, bw_buf *out) {
    const char *data = NULL;
    Py_ssize_t size = 0;
    PyObject *owned = NULL; /* keeps data alive */
    Py_buffer view;
    int have_view = 0, rc = -1;
    unsigned char small[9];
    if (item == Py_None)
        return none_error(index);
    switch (c->st->kind) {
    case BW_V_TEXT:
    case BW_V_ASCII:
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected a str for %s, got %.80s",
                         index, c->st->name, Py_TYPE(item)->tp_name);
            return -1;
        }
        if (c->st->kind == BW_V_ASCII && !PyUnicode_IS_ASCII(item)) {
            owned = PyUnicode_AsASCIIString(item); /* raises UnicodeEncodeError */
            if (owned == NULL)
                return -1;
            data = PyBytes_AS_STRING(owned);
            size = PyBytes_GET_SIZE(owned);
            break;
        }
        data = PyUnicode_AsUTF8AndSize(item, &size);
        if (data == NULL)
            return -1;
        break;
    case BW_V_BLOB:
        if (PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected bytes for blob, got str",
                         index);
            return -1;
        }
        if (PyBytes_CheckExact(item) || PyByteArray_CheckExact(item)) {
            if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0)
                return -1;
            have_view = 1;
            data = view.buf;
            size = view.len;
            break;
        }
        /* Anything else is what bytes(item) makes of it, as the driver's blob packing:
           __bytes__ first, an object with __index__ (a NumPy integer) gives that many zero
           bytes, then the buffer (any layout) or an iterable of ints; its errors as they are */
        owned = PyObject_CallOneArg((PyObject *)&PyBytes_Type, item); /* new reference */
        if (owned == NULL)
            return -1;
        data = PyBytes_AS_STRING(owned);
        size = PyBytes_GET_SIZE(owned);
        break;
    default: { /* BW_V_VARINT: minimal two's complement, big-endian */
        if (!PyLong_Check(item)) { /* as the driver: its varint packing works on ints only */
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected an int for varint, got "
                         "%.80s", index, Py_TYPE(item)->tp_name);
            return -1;
        }
        PyObject *number = Py_NewRef(item);
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
        if (v == -1 && !overflow && PyErr_Occurred()) {
            Py_DECREF(number);
            return -1;
        }
        if (!overflow) {
            Py_DECREF(number);
            /* bytes needed: bit length of v (or of ~v when negative) // 8 + 1 */
            uint64_t magnitude = v < 0 ? ~(uint64_t)v : (uint64_t)v;
            int bits = magnitude == 0 ? 0 : 64 - __builtin_clzll(magnitude);
            size = bits / 8 + 1;
            for (Py_ssize_t i = size; i-- > 0; v >>= 8) /* arithmetic shift keeps the sign */
                small[i] = (unsigned char)(v & 0xff);
            data = (const char *)small;
            break;
        }
        /* big: (bit_length of v, or of ~v when negative) // 8 + 1 bytes, signed */
        PyObject *basis = overflow < 0 ? PyNumber_Invert(number) : Py_NewRef(number);
        PyObject *nbits = basis ? PyObject_CallMethod(basis, "bit_length", NULL) : NULL;
        Py_XDECREF(basis);
        Py_ssize_t n = nbits ? PyLong_AsSsize_t(nbits) : -1;
        Py_XDECREF(nbits);
        PyObject *method = n >= 0 ? PyObject_GetAttrString(number, "to_bytes") : NULL;
        PyObject *args = method ? Py_BuildValue("(ns)", n / 8 + 1, "big") : NULL;
        PyObject *kwargs = args ? Py_BuildValue("{sO}", "signed", Py_True) : NULL;
        owned = kwargs ? PyObject_Call(method, args, kwargs) : NULL; /* new reference */
        Py_XDECREF(kwargs);
        Py_XDECREF(args);
        Py_XDECREF(method);
        Py_DECREF(number);
        if (owned == NULL)
            return -1;
        data = PyBytes_AS_STRING(owned);
        size = PyBytes_GET_SIZE(owned);
        break;
    }
    }
    if (bw_buf_reserve(out, BW_VINT_MAX + (size_t)size) < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    out->len += bw_vint_write((uint64_t)size, (unsigned char *)bw_buf_tail(out));
    bw_buf_put(out, data, (size_t)size);
    rc = 0;
cleanup:
    if (have_view)
        PyBuffer_Release(&view);
    Py_XDECREF(owned);
    return rc;
}

/* ---- rows in memory (NumPy or Arrow) ---------------------------------------------------- */

/* Below this many output bytes the GIL is kept: releasing it costs more than it frees. */
#define GIL_RELEASE_BYTES (1 << 20)

typedef struct {
    const char *base;              /* row 0, when rows are evenly spaced */
    npy_intp row_stride;
    npy_intp elem_stride;
    const bw_arrow_vectors *arrow; /* non-NULL: rows found through the Arrow offsets */
    int src_width;                 /* bytes of one source value */
    int swap;                      /* source byte order is not big-endian */
    int nat;                       /* datetime64/timedelta64 source: INT64_MIN is NaT, a null */
    long long offset;              /* wire value = source value + offset (date from days) */
} row_source;

static inline const char *row_ptr(const row_source *s, Py_ssize_t r) {
    if (s->arrow != NULL) {
        int64_t first = 0, count = 0;
        bw_arrow_vectors_row(s->arrow, r, &first, &count);
        return s->arrow->values + first * s->arrow->value_width;
    }
    return s->base + r * s->row_stride;
}

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
static int check_source(bw_vector_codec *c, const row_source *s, Py_ssize_t rows,
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
        const char *row = row_ptr(s, r);
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
                null_error(i, "NaT");
            } else if (v < lo || v > hi) {
                PyObject *value = PyLong_FromLongLong(v); /* new reference */
                PyObject *offset = value ? PyLong_FromLongLong(s->offset) : NULL;
                PyObject *wire = offset ? PyNumber_Add(value, offset) : NULL;
                if (wire != NULL)
                    range_error(c, i, wire);
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
static void fill_row(const bw_vector_codec *c, const row_source *s, const char *src, char *dst) {
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
        /* datetime64[D] days, checked by check_source, to the raw value (epoch at 2**31) */
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

static void fill_rows(const bw_vector_codec *c, const row_source *s, Py_ssize_t rows,
                      char *const *dsts, char *dst0) {
    for (Py_ssize_t r = 0; r < rows; r++)
        fill_row(c, s, row_ptr(s, r), dsts ? dsts[r] : dst0 + r * c->row_size);
}

/* Appends `rows` new bytes objects filled from s to list. 0, or -1 with an exception. */
static int emit_rows_list(bw_vector_codec *c, const row_source *s, Py_ssize_t rows,
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
            fill_row(c, s, row_ptr(s, r), dsts[r]);
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
static int emit_rows_into(bw_vector_codec *c, const row_source *s, Py_ssize_t rows,
                          PyObject *bytearray) {
    Py_ssize_t old = PyByteArray_GET_SIZE(bytearray);
    if (rows > (PY_SSIZE_T_MAX - old) / (c->row_size ? c->row_size : 1)) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(bytearray, old + rows * c->row_size) < 0)
        return -1;
    char *dst = PyByteArray_AS_STRING(bytearray) + old;
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
        return (PyArrayObject *)Py_NewRef(arr); /* widened in fill_row, no temporary */
    int slot = dt_slot(st);
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

/* The values of a 1-D (one row) or 2-D array as a row_source over *held, a new reference to
   arr or to its safe cast that the caller releases. 0, or -1 with a TypeError. */
static int array_source(bw_vector_codec *c, PyArrayObject *arr, row_source *s,
                        PyArrayObject **held) {
    int nat;
    PyArrayObject *src = numeric_array(c, arr, &nat); /* new reference */
    if (src == NULL)
        return -1;
    int two_d = PyArray_NDIM(src) == 2;
    *s = (row_source){.base = PyArray_BYTES(src), .row_stride = two_d ? PyArray_STRIDE(src, 0) : 0,
                      .elem_stride = PyArray_STRIDE(src, two_d), .src_width =
                      (int)PyArray_ITEMSIZE(src), .swap = array_swap(c, src), .nat = nat,
                      .offset = nat && c->st->kind == BW_V_DATE ? (1LL << 31) : 0};
    *held = src;
    return 0;
}

static PyObject *shape_error(PyArrayObject *arr, const char *expected, Py_ssize_t dim) {
    PyObject *shape = PyObject_GetAttrString((PyObject *)arr, "shape"); /* new reference */
    if (shape == NULL)
        return NULL;
    PyErr_Format(PyExc_ValueError, "expected %s array of shape %s%zd%s, got an array of shape %S",
                 expected[0] == '1' ? "a 1-D" : "a 2-D", expected[0] == '1' ? "(" : "(rows, ",
                 dim, expected[0] == '1' ? ",)" : ")", shape);
    Py_DECREF(shape);
    return NULL;
}

/* ---- serialize ------------------------------------------------------------------------ */

static PyObject *passthrough(bw_vector_codec *c, PyObject *v) {
    if (c->st->prefixed || c->row_size == 0) {
        PyErr_Format(PyExc_TypeError, "bytes cannot be passed through for vector<%s, %zd>: %s is "
                     "a variable-width subtype; pass a sequence of values", c->st->name, c->dim,
                     c->st->name);
        return NULL;
    }
    Py_ssize_t n = PyBytes_Check(v) ? PyBytes_GET_SIZE(v) : PyByteArray_GET_SIZE(v);
    if (n != c->row_size) {
        PyErr_Format(PyExc_ValueError, "Expected vector of type %s and dimension %zd to have "
                     "serialized size %zd; observed serialized size of %zd instead", c->st->name,
                     c->dim, c->row_size, n);
        return NULL;
    }
    if (PyBytes_CheckExact(v))
        return Py_NewRef(v);
    return PyBytes_FromStringAndSize(PyBytes_Check(v) ? PyBytes_AS_STRING(v)
                                                      : PyByteArray_AS_STRING(v), n);
}

/* numpy.ma arrays would otherwise be read through their data, masked values included. */
static int reject_masked(PyObject *v) {
    if (PyArray_CheckExact(v) || !PyObject_HasAttrString(v, "mask"))
        return 0;
    PyErr_SetString(PyExc_TypeError, "masked arrays cannot be serialized: CQL vectors hold no "
                    "nulls; fill the masked values first (arr.filled(...))");
    return -1;
}

/* Writes a sequence's elements: constant-size kinds at dst, others appended to out. */
static int write_sequence(bw_vector_codec *c, PyObject *seq, char *dst, bw_buf *out) {
    for (Py_ssize_t i = 0; i < c->dim; i++) {
        /* a conversion hook may run Python code that resizes the list: re-check each time */
        if (i >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "the sequence changed size during serialization");
            return -1;
        }
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (c->st->kind == BW_V_F32 && PyFloat_CheckExact(item)) { /* the embedding case */
            double d = PyFloat_AS_DOUBLE(item);
            float f;
            uint32_t bits;
            if (double_to_float(d, &f) < 0)
                return range_error(c, i, item);
            memcpy(&bits, &f, 4);
            store_be32(dst + 4 * i, bits);
            continue;
        }
        Py_INCREF(item);
        int rc = dst != NULL ? put_fixed_item(c, item, i, dst + i * c->elem_size)
                             : put_var_item(c, item, i, out);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One row into dst (constant-size kinds; row_size bytes) or appended to out (others). */
static int write_row(bw_vector_codec *c, PyObject *v, char *dst, bw_buf *out) {
    if (PyArray_Check(v)) {
        PyArrayObject *arr = (PyArrayObject *)v;
        if (reject_masked(v) < 0)
            return -1;
        if (PyArray_NDIM(arr) != 1) {
            shape_error(arr, "1", c->dim);
            return -1;
        }
        if (PyArray_DIM(arr, 0) != c->dim) {
            length_error(c, PyArray_DIM(arr, 0));
            return -1;
        }
        if (bw_vkind_numeric(c->st)) {
            row_source s;
            PyArrayObject *src; /* holds the values s points to */
            if (array_source(c, arr, &s, &src) < 0)
                return -1;
            int rc = check_source(c, &s, 1, 0, 0);
            if (rc == 0)
                fill_row(c, &s, s.base, dst);
            Py_DECREF(src);
            return rc;
        }
    } else if (PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "expected a sequence of %s values for vector<%s, %zd>, got "
                     "str", c->st->name, c->st->name, c->dim);
        return -1;
    }
    PyObject *seq = PySequence_Fast(v, "expected a sequence, a 1-D numpy array or bytes for a "
                                       "CQL vector"); /* new reference */
    if (seq == NULL)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != c->dim)
        length_error(c, PySequence_Fast_GET_SIZE(seq));
    else
        rc = write_sequence(c, seq, dst, out);
    Py_DECREF(seq);
    return rc;
}

PyObject *bw_vec_serialize(bw_vector_codec *c, PyObject *v) {
    if (PyBytes_Check(v) || PyByteArray_Check(v))
        return passthrough(c, v);
    if (c->row_size > 0) {
        PyObject *result = PyBytes_FromStringAndSize(NULL, c->row_size); /* new reference */
        if (result == NULL)
            return NULL;
        if (write_row(c, v, PyBytes_AS_STRING(result), NULL) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        return result;
    }
    bw_buf out;
    if (bw_buf_init(&out, 16 * (size_t)c->dim) < 0)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    if (write_row(c, v, NULL, &out) == 0)
        result = PyBytes_FromStringAndSize(out.data, (Py_ssize_t)out.len);
    bw_buf_free(&out);
    return result;
}

/* ---- many rows ----------------------------------------------------------------------- */

typedef struct {
    PyObject *list;      /* list of bytes being built, or NULL */
    PyObject *bytearray; /* contiguous output, or NULL */
} sink;

/* Rows [0, rows) of s to the sink, once every value passed check_source (first_row: the
   number of rows before s in the batch, for error messages). */
static int emit(bw_vector_codec *c, const row_source *s, Py_ssize_t rows, Py_ssize_t first_row,
                sink *k) {
    if (check_source(c, s, rows, first_row, 1) < 0)
        return -1;
    return k->list ? emit_rows_list(c, s, rows, k->list) : emit_rows_into(c, s, rows, k->bytearray);
}

static int many_from_ndarray(bw_vector_codec *c, PyArrayObject *arr, sink *k) {
    if (PyArray_NDIM(arr) != 2 || PyArray_DIM(arr, 1) != c->dim) {
        shape_error(arr, "2", c->dim);
        return -1;
    }
    row_source s;
    PyArrayObject *src; /* holds the values s points to */
    if (array_source(c, arr, &s, &src) < 0)
        return -1;
    int rc = emit(c, &s, PyArray_DIM(src, 0), 0, k);
    Py_DECREF(src);
    return rc;
}

static int emit_json(const row_source *s, Py_ssize_t rows, Py_ssize_t dim, int shortest,
                     PyObject *list); /* with the JSON writer, below */

/* A row that bw_arrow_vectors_check refused, as a ValueError. to_json_many (terse) keeps its
   own short wording apart from serialize_many/_into's: each is what its callers match on. */
static void arrow_row_error(const bw_vector_codec *c, int64_t row, bw_arrow_row_problem why,
                            int64_t len, int terse) {
    if (terse)
        PyErr_Format(PyExc_ValueError, "row %lld: %s", (long long)row,
                     why == BW_ARROW_ROW_NULL ? "null vector"
                     : why == BW_ARROW_ROW_WRONG_LENGTH ? "wrong number of values"
                     : why == BW_ARROW_ROW_NULL_VALUE ? "null value inside the vector"
                     : "malformed Arrow offsets");
    else if (why == BW_ARROW_ROW_NULL)
        PyErr_Format(PyExc_ValueError, "row %lld is null: CQL vectors cannot be null here",
                     (long long)row);
    else if (why == BW_ARROW_ROW_WRONG_LENGTH)
        PyErr_Format(PyExc_ValueError, "row %lld has %lld values, expected %zd "
                     "(dimension of vector<%s, %zd>)", (long long)row, (long long)len, c->dim,
                     c->st->name, c->dim);
    else if (why == BW_ARROW_ROW_NULL_VALUE)
        PyErr_Format(PyExc_ValueError, "row %lld holds a null value: CQL vectors cannot "
                     "hold nulls", (long long)row);
    else
        PyErr_Format(PyExc_ValueError, "row %lld: malformed Arrow offsets", (long long)row);
}

/* Reads an Arrow array/stream batch by batch and hands each checked batch on: as CQL rows
   to the sink k (serialize_many/_into), or, when json_list is not NULL, as the JSON text of
   each row appended to json_list (to_json_many, float32 as `shortest` asks). 0 or -1. */
static int rows_from_arrow(bw_vector_codec *c, PyObject *obj, sink *k, PyObject *json_list,
                           int shortest) {
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
        /* JSON text is written from either width as it stands; CQL float rows would have to
           narrow float64 values, which NumPy input refuses too */
        if (json_list == NULL && v.value_width == 8 && c->st->kind == BW_V_F32) {
            PyErr_Format(PyExc_TypeError, "cannot cast Arrow float64 values to float (float32) "
                         "under NumPy's 'safe' casting rule; cast the column explicitly, e.g. "
                         "pyarrow.compute.cast(col, pyarrow.list_(pyarrow.float32(), %zd))", c->dim);
            rc = -1;
            break;
        }
        int64_t bad_row = 0, bad_len = 0;
        bw_arrow_row_problem why = BW_ARROW_ROW_OK;
        if (bw_arrow_vectors_check(&v, c->dim, &bad_row, &why, &bad_len) < 0) {
            arrow_row_error(c, bad_row + base_row, why, bad_len, json_list != NULL);
            rc = -1;
            break;
        }
        if (v.length > 0 && v.values == NULL) {
            PyErr_SetString(PyExc_ValueError, "malformed Arrow array: no values buffer");
            rc = -1;
            break;
        }
        row_source s = {.arrow = &v, .elem_stride = v.value_width, .src_width = v.value_width,
                        .swap = !BW_NATIVE_BIG_ENDIAN}; /* Arrow memory is native order */
        if ((json_list != NULL ? emit_json(&s, (Py_ssize_t)v.length, c->dim, shortest, json_list)
                               : emit(c, &s, (Py_ssize_t)v.length, (Py_ssize_t)base_row, k)) < 0) {
            rc = -1;
            break;
        }
        base_row += v.length;
    }
    bw_arrow_source_close(&src);
    return rc < 0 ? -1 : 0;
}

static int many_from_arrow(bw_vector_codec *c, PyObject *obj, sink *k) {
    if (c->st->kind != BW_V_F32 && c->st->kind != BW_V_F64) {
        PyErr_Format(PyExc_TypeError, "Arrow input is read for float and double vectors only, "
                     "not %s", c->st->name);
        return -1;
    }
    return rows_from_arrow(c, obj, k, NULL, 0);
}

static int many_from_sequence(bw_vector_codec *c, PyObject *batch, sink *k) {
    PyObject *seq = PySequence_Fast(batch, "expected a 2-D numpy array, an Arrow array or "
                                           "stream, or a sequence of vectors"); /* new ref */
    if (seq == NULL)
        return -1;
    int rc = -1;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq);
    if (k->bytearray != NULL) {
        if (rows > PY_SSIZE_T_MAX / c->row_size) {
            PyErr_NoMemory();
            goto cleanup;
        }
        if (PyByteArray_Resize(k->bytearray, rows * c->row_size) < 0)
            goto cleanup;
    }
    for (Py_ssize_t r = 0; r < rows && r < PySequence_Fast_GET_SIZE(seq); r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, r);
        Py_INCREF(row);
        if (k->list != NULL) {
            PyObject *b = bw_vec_serialize(c, row); /* new reference */
            Py_DECREF(row);
            if (b == NULL || PyList_Append(k->list, b) < 0) {
                Py_XDECREF(b);
                bw_vec_prefix_row(r, 1);
                goto cleanup;
            }
            Py_DECREF(b);
            continue;
        }
        int wrote;
        if (PyBytes_Check(row) || PyByteArray_Check(row)) {
            PyObject *b = passthrough(c, row); /* new reference */
            wrote = b ? 0 : -1;
            if (b != NULL) {
                memcpy(PyByteArray_AS_STRING(k->bytearray) + r * c->row_size,
                       PyBytes_AS_STRING(b), (size_t)c->row_size);
                Py_DECREF(b);
            }
        } else {
            /* re-read the address each row: the bytearray is ours, but stay simple */
            wrote = write_row(c, row, PyByteArray_AS_STRING(k->bytearray) + r * c->row_size, NULL);
        }
        Py_DECREF(row);
        if (wrote < 0) {
            bw_vec_prefix_row(r, 1);
            goto cleanup;
        }
    }
    if (PySequence_Fast_GET_SIZE(seq) != rows) {
        PyErr_SetString(PyExc_RuntimeError, "the sequence changed size during serialization");
        goto cleanup;
    }
    rc = 0;
cleanup:
    Py_DECREF(seq);
    return rc;
}

/* Whether obj has a NumPy object dtype (a pandas Series of per-row arrays, as to_pandas()
   makes of a vector column): iterating it is far cheaper than its Arrow export, which would
   convert every row. */
static int has_object_dtype(PyObject *obj) {
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype"); /* new reference */
    if (dtype == NULL) {
        PyErr_Clear();
        return 0;
    }
    int yes = PyArray_DescrCheck(dtype) && ((PyArray_Descr *)dtype)->type_num == NPY_OBJECT;
    Py_DECREF(dtype);
    return yes;
}

static int many(bw_vector_codec *c, PyObject *batch, sink *k) {
    if (PyArray_Check(batch)) {
        PyArrayObject *arr = (PyArrayObject *)batch;
        if (reject_masked(batch) < 0)
            return -1;
        /* a 1-D object array holds one vector per row: a sequence of vectors */
        if (bw_vkind_numeric(c->st) && !(PyArray_NDIM(arr) == 1 && PyArray_TYPE(arr) == NPY_OBJECT))
            return many_from_ndarray(c, arr, k);
        return many_from_sequence(c, batch, k);
    }
    if (bw_arrow_source_check(batch) && !has_object_dtype(batch))
        return many_from_arrow(c, batch, k);
    if (PyUnicode_Check(batch) || PyBytes_Check(batch) || PyByteArray_Check(batch)) {
        PyErr_Format(PyExc_TypeError, "expected a batch of vectors (2-D numpy array, Arrow "
                     "array or sequence of vectors), got %.80s", Py_TYPE(batch)->tp_name);
        return -1;
    }
    return many_from_sequence(c, batch, k);
}

PyObject *bw_vec_serialize_many(bw_vector_codec *c, PyObject *batch) {
    sink k = {.list = PyList_New(0), .bytearray = NULL};
    if (k.list == NULL)
        return NULL;
    if (many(c, batch, &k) < 0) {
        Py_DECREF(k.list);
        return NULL;
    }
    return k.list;
}

PyObject *bw_vec_serialize_into(bw_vector_codec *c, PyObject *batch) {
    if (c->row_size == 0) {
        PyErr_Format(PyExc_ValueError, "serialize_into needs rows of one size; vector<%s, %zd> "
                     "rows vary in size, use serialize_many", c->st->name, c->dim);
        return NULL;
    }
    sink k = {.list = NULL, .bytearray = PyByteArray_FromStringAndSize(NULL, 0)};
    if (k.bytearray == NULL)
        return NULL;
    if (many(c, batch, &k) < 0) {
        Py_DECREF(k.bytearray);
        return NULL;
    }
    return Py_BuildValue("(Nn)", k.bytearray, c->row_size); /* steals the bytearray */
}

/* ---- JSON arrays ------------------------------------------------------------------------ */

typedef struct {
    const row_source *s;
    Py_ssize_t rows;
    Py_ssize_t dim;
    int shortest;
    bw_buf *out;
    size_t *ends; /* ends[r]: out->len after row r */
} json_job;

/* Writes every row as "[v, v, ...]" like bulkwire.dumps(row). No Python: runs without the
   GIL. 0, or -1 when out of memory. */
static int json_rows(const json_job *j) {
    const row_source *s = j->s;
    bw_num_type type = s->src_width == 4 ? BW_NUM_F32 : BW_NUM_F64;
    int swapped = s->swap == BW_NATIVE_BIG_ENDIAN; /* stored in the other byte order */
    for (Py_ssize_t r = 0; r < j->rows; r++) {
        if (bw_json_array(j->out, type, row_ptr(s, r), (size_t)j->dim, s->elem_stride, swapped,
                          j->shortest) < 0)
            return -1;
        j->ends[r] = j->out->len;
    }
    return 0;
}

/* Appends the JSON text of `rows` rows to list, one bytes object per row. */
static int emit_json(const row_source *s, Py_ssize_t rows, Py_ssize_t dim, int shortest,
                     PyObject *list) {
    bw_buf out;
    int rc = -1;
    size_t *ends = PyMem_Malloc(sizeof(size_t) * (size_t)(rows > 0 ? rows : 1));
    if (ends == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (bw_buf_init(&out, 0) < 0) {
        PyMem_Free(ends);
        PyErr_NoMemory();
        return -1;
    }
    json_job job = {.s = s, .rows = rows, .dim = dim, .shortest = shortest, .out = &out,
                    .ends = ends};
    int written;
    Py_BEGIN_ALLOW_THREADS
    written = json_rows(&job);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    size_t start = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *b = PyBytes_FromStringAndSize(out.data + start, (Py_ssize_t)(ends[r] - start));
        if (b == NULL || PyList_Append(list, b) < 0) {
            Py_XDECREF(b);
            goto cleanup;
        }
        Py_DECREF(b);
        start = ends[r];
    }
    rc = 0;
cleanup:
    bw_buf_free(&out);
    PyMem_Free(ends);
    return rc;
}

PyObject *bw_vec_to_json_many(bw_vector_codec *c, PyObject *batch, int float32_shortest) {
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    int rc;
    if (PyArray_Check(batch)) {
        PyArrayObject *arr = (PyArrayObject *)batch;
        PyArray_Descr *d = PyArray_DESCR(arr);
        if (PyArray_NDIM(arr) != 2 || PyArray_DIM(arr, 1) != c->dim) {
            shape_error(arr, "2", c->dim);
            rc = -1;
        } else if (d->kind != 'f' || (PyDataType_ELSIZE(d) != 4 && PyDataType_ELSIZE(d) != 8)) {
            PyErr_Format(PyExc_TypeError, "to_json_many reads float32 or float64 arrays, got "
                         "dtype %S", (PyObject *)d);
            rc = -1;
        } else {
            row_source s = {.base = PyArray_BYTES(arr), .row_stride = PyArray_STRIDE(arr, 0),
                            .elem_stride = PyArray_STRIDE(arr, 1),
                            .src_width = (int)PyDataType_ELSIZE(d),
                            .swap = BW_NATIVE_BIG_ENDIAN ? PyArray_ISBYTESWAPPED(arr)
                                                         : !PyArray_ISBYTESWAPPED(arr)};
            rc = emit_json(&s, PyArray_DIM(arr, 0), c->dim, float32_shortest, list);
        }
    } else if (bw_arrow_source_check(batch)) {
        rc = rows_from_arrow(c, batch, NULL, list, float32_shortest);
    } else {
        PyErr_Format(PyExc_TypeError, "to_json_many expects a 2-D float numpy array or an Arrow "
                     "vector array/stream, got %.80s", Py_TYPE(batch)->tp_name);
        rc = -1;
    }
    if (rc < 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
}
