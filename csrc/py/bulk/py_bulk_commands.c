#include "py_bulk_commands.h"

#include <datetime.h>
#include <math.h>

#include "bulk_commands.h"
#include "datetime_text.h"

static PyObject *name_timestamp; /* "timestamp" */
static PyObject *name_replace;   /* "replace" */
static PyObject *key_tzinfo;     /* "tzinfo" */

int bw_bulk_commands_init(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return -1;
    name_timestamp = PyUnicode_InternFromString("timestamp");
    name_replace = PyUnicode_InternFromString("replace");
    key_tzinfo = PyUnicode_InternFromString("tzinfo");
    if (name_timestamp == NULL || name_replace == NULL || key_tzinfo == NULL)
        return -1;
    return 0;
}

const char *bw_command_text(PyObject *text, const char *what, Py_ssize_t *len) {
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what, Py_TYPE(text)->tp_name);
        return NULL;
    }
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, len);
    if (utf8 == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be valid text: %R holds a lone surrogate", what,
                     text);
    }
    return utf8;
}

int bw_counter_delta(PyObject *delta, int64_t *value) {
    if (!PyLong_Check(delta) || PyBool_Check(delta)) {
        PyErr_Format(PyExc_TypeError, "delta must be an int, not %.100s", Py_TYPE(delta)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(delta, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "delta must fit in 64 bits (a counter's range), not %R",
                     delta);
        return -1;
    }
    *value = (int64_t)v;
    return 0;
}

/* The seconds since the epoch as a double, as datetime.timestamp() computes them for a datetime
   that is naive (taken as UTC) or in UTC: total microseconds divided by 10**6, rounded once.
   Python divides ints that fit a double's 53 bits in floating point (exact operands, one
   rounding); larger ones are left to Python's own division. 0, or -1 with an exception set. */
static int utc_seconds(PyObject *dt, double *seconds) {
    bw_civil_time t = {
        .year = PyDateTime_GET_YEAR(dt), .month = PyDateTime_GET_MONTH(dt),
        .day = PyDateTime_GET_DAY(dt), .hour = PyDateTime_DATE_GET_HOUR(dt),
        .minute = PyDateTime_DATE_GET_MINUTE(dt), .second = PyDateTime_DATE_GET_SECOND(dt),
        .microsecond = PyDateTime_DATE_GET_MICROSECOND(dt)};
    int64_t micros = bw_civil_time_epoch_micros(&t);
    const int64_t exact = (int64_t)1 << 53;
    if (micros >= -exact && micros <= exact) {
        *seconds = (double)micros / 1e6;
        return 0;
    }
    PyObject *numerator = PyLong_FromLongLong(micros);
    PyObject *denominator = PyLong_FromLong(1000000);
    PyObject *quotient = NULL;
    if (numerator != NULL && denominator != NULL)
        quotient = PyNumber_TrueDivide(numerator, denominator);
    Py_XDECREF(numerator);
    Py_XDECREF(denominator);
    if (quotient == NULL)
        return -1;
    *seconds = PyFloat_AsDouble(quotient);
    Py_DECREF(quotient);
    return *seconds == -1.0 && PyErr_Occurred() ? -1 : 0;
}

int bw_timestamp_unix_ms(PyObject *timestamp, int64_t *ms) {
    if (!PyDateTime_Check(timestamp)) {
        PyErr_Format(PyExc_TypeError, "timestamp must be a datetime, not %.100s",
                     Py_TYPE(timestamp)->tp_name);
        return -1;
    }
    PyObject *tzinfo = PyDateTime_DATE_GET_TZINFO(timestamp); /* borrowed */
    double seconds;
    if (PyDateTime_CheckExact(timestamp) &&
        (tzinfo == Py_None || tzinfo == PyDateTime_TimeZone_UTC)) {
        if (utc_seconds(timestamp, &seconds) < 0)
            return -1;
    } else {
        /* through Python: tzinfo's utcoffset and a subclass's own timestamp() decide */
        PyObject *aware = NULL, *result = NULL;
        if (tzinfo == Py_None) {
            PyObject *args = PyTuple_New(0);
            PyObject *kwargs = args != NULL ? PyDict_New() : NULL;
            if (kwargs != NULL && PyDict_SetItem(kwargs, key_tzinfo, PyDateTime_TimeZone_UTC) == 0) {
                PyObject *replace = PyObject_GetAttr(timestamp, name_replace);
                if (replace != NULL) {
                    aware = PyObject_Call(replace, args, kwargs);
                    Py_DECREF(replace);
                }
            }
            Py_XDECREF(args);
            Py_XDECREF(kwargs);
            if (aware == NULL)
                return -1;
        } else {
            aware = Py_NewRef(timestamp);
        }
        result = PyObject_CallMethodNoArgs(aware, name_timestamp);
        Py_DECREF(aware);
        if (result == NULL)
            return -1;
        seconds = PyFloat_AsDouble(result);
        Py_DECREF(result);
        if (seconds == -1.0 && PyErr_Occurred())
            return -1;
    }
    double millis = seconds * 1000;
    /* int() of the product: truncated toward zero; any datetime's fits in 64 bits */
    if (!isfinite(millis) || fabs(millis) >= 9.2e18) {
        PyErr_Format(PyExc_ValueError, "timestamp %R is out of range", timestamp);
        return -1;
    }
    *ms = (int64_t)millis;
    return 0;
}

/* Appends ",<text of value>" for one value; `index` names it in errors. */
static int series_value(bw_buf *out, PyObject *value, Py_ssize_t index) {
    if (value == Py_None)
        return bw_time_series_value_null(out) < 0 ? (PyErr_NoMemory(), -1) : 0;
    if (PyFloat_Check(value)) {
        double v = PyFloat_AS_DOUBLE(value);
        if (!isfinite(v)) {
            PyErr_Format(PyExc_ValueError, "values[%zd] must be finite, not %R", index, value);
            return -1;
        }
        return bw_time_series_value_double(out, v) < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    if (PyLong_Check(value) && !PyBool_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow)
            return bw_time_series_value_int(out, (int64_t)v) < 0 ? (PyErr_NoMemory(), -1) : 0;
        /* str() of a wider int, as the official client writes it */
        PyObject *text = PyLong_Type.tp_repr(value);
        if (text == NULL)
            return -1;
        Py_ssize_t len;
        const char *digits = PyUnicode_AsUTF8AndSize(text, &len);
        int rc = digits == NULL ? -1 : 0;
        if (rc == 0 && (bw_buf_append(out, ",", 1) < 0 || bw_buf_append(out, digits, (size_t)len) < 0)) {
            PyErr_NoMemory();
            rc = -1;
        }
        Py_DECREF(text);
        return rc;
    }
    PyErr_Format(PyExc_TypeError, "values[%zd] must be an int, a float or None, not %.100s", index,
                 Py_TYPE(value)->tp_name);
    return -1;
}

int bw_series_values(bw_buf *out, PyObject *values) {
    if (!PyList_Check(values) && !PyTuple_Check(values)) {
        PyErr_Format(PyExc_TypeError, "values must be a list or tuple, not %.100s",
                     Py_TYPE(values)->tp_name);
        return -1;
    }
    /* a list's items are read one by one: a value's conversion runs no Python code, but the
       length is read again each time all the same */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(values); i++)
        if (series_value(out, PySequence_Fast_GET_ITEM(values, i), i) < 0)
            return -1;
    return 0;
}
