#include "py_command_framing.h"

#include "buffer_pool.h"
#include "bulk_commands.h"
#include "json_string.h"
#include "put_command.h"
#include "py_bulk_commands.h"

#include <stdlib.h>

int bw_command_writer_init(bw_command_writer *w, size_t threshold, const bw_encode_options *opts) {
    w->buf.data = NULL;
    w->buf.len = w->buf.cap = 0;
    w->threshold = threshold;
    w->started = w->finished = 0;
    w->commands = 0;
    w->bytes = 0;
    w->handovers = 0;
    w->opts = *opts;
    w->open = BW_OPEN_NONE;
    w->open_written = 0;
    w->in_batch = 0;
    w->pending_floats = 0;
    w->consumer_behind = 0;
    bw_json_runs_clear(&w->runs);
    w->walker = bw_walker_new();
    if (w->walker == NULL)
        return -1;
    bw_pool_retain();
    return 0;
}

void bw_command_writer_free(bw_command_writer *w) {
    bw_buf_free(&w->buf);
    bw_walker_free(w->walker);
    w->walker = NULL;
    bw_pool_unretain();
}

int bw_command_writer_ensure_buffer(bw_command_writer *w) {
    if (w->buf.data != NULL)
        return 0;
    size_t cap;
    char *data = bw_pool_acquire(bw_pool_body_capacity(w->threshold), &cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf.data = data;
    w->buf.len = 0;
    w->buf.cap = cap;
    return 0;
}

/* A command's id as a JSON string of raw UTF-8, as the official client writes it (only '"',
   '\\' and control characters escaped). 0, or -1 with an exception set. */
static int write_command_id(bw_buf *out, PyObject *id) {
    Py_ssize_t len;
    const char *utf8 = bw_command_text(id, "id", &len);
    if (utf8 == NULL)
        return -1;
    if (bw_json_string_utf8(out, utf8, (size_t)len) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int bw_command_writer_put(bw_command_writer *w, PyObject *id, PyObject *entity,
                          PyObject *own_members, PyObject *metadata, PyObject *metadata_text,
                          PyObject *skip_keys) {
    if (w->finished) {
        PyErr_SetString(PyExc_RuntimeError, "the bulk insert body is already finished");
        return -1;
    }
    if (!PyUnicode_Check(id) || !PyDict_Check(metadata) ||
        (metadata_text != NULL && !PyBytes_CheckExact(metadata_text)) ||
        (skip_keys != NULL && !PyTuple_Check(skip_keys))) {
        PyErr_SetString(PyExc_TypeError, "id must be str, metadata a dict, metadata_text bytes, "
                                         "skip_keys a tuple");
        return -1;
    }
    if (bw_command_writer_check_no_series(w) < 0 || bw_command_writer_ensure_buffer(w) < 0)
        return -1;
    bw_buf *out = &w->buf;
    size_t start = out->len;
    bw_walker *walker = w->walker;
    bw_walker_init(walker, &w->opts, out);
    bw_json_runs runs_before = w->runs;
    if (w->pending_floats && !w->consumer_behind)
        walker->runs = &w->runs;
    Py_ssize_t members = 0;

    /* '[' or ',' then the command; the walker writes the id as a JSON string */
    if (bw_command_writer_begin_command(w) < 0)
        goto error;
    if (bw_put_command_open(out) < 0)
        goto nomem;
    if (write_command_id(out, id) < 0)
        goto error;
    if (bw_put_command_document(out) < 0)
        goto nomem;
    if (bw_walk_open_object(walker, entity, own_members, skip_keys, &members) < 0)
        goto error;
    if (bw_put_command_metadata(out, members > 0) < 0)
        goto nomem;
    if (metadata_text != NULL) {
        if (bw_buf_append(out, PyBytes_AS_STRING(metadata_text),
                          (size_t)PyBytes_GET_SIZE(metadata_text)) < 0)
            goto nomem;
    } else if (bw_walk(walker, metadata) < 0) {
        goto error;
    }
    if (bw_put_command_close(out) < 0)
        goto nomem;
    bw_command_writer_command_done(w);
    w->commands++;
    w->bytes += out->len - start;
    return 0;
nomem:
    PyErr_NoMemory();
error:
    bw_json_runs_rollback(&w->runs, out->data, runs_before);
    out->len = start; /* nothing half-written stays behind */
    return -1;
}

PyObject *bw_command_writer_metadata_text(bw_command_writer *w, PyObject *metadata) {
    if (!PyDict_Check(metadata)) {
        PyErr_SetString(PyExc_TypeError, "metadata must be a dict");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(metadata, &pos, &key, &value))
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value))
            Py_RETURN_NONE;
    bw_buf text;
    if (bw_buf_init(&text, 128) < 0)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    bw_walker_init(w->walker, &w->opts, &text); /* strings only: no pending float runs */
    if (bw_walk(w->walker, metadata) == 0)
        result = PyBytes_FromStringAndSize(text.data, (Py_ssize_t)text.len);
    bw_buf_free(&text);
    return result;
}

int bw_command_writer_check_no_series(const bw_command_writer *w) {
    if (w->open != BW_OPEN_SERIES)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "a time series of this bulk insert is still open: close "
                                        "it (leave its with block) before anything else");
    return -1;
}

int bw_command_writer_end_open(bw_command_writer *w) {
    if (w->finished) { /* checked again here: a caller may have run Python code since */
        PyErr_SetString(PyExc_RuntimeError, "the bulk insert body is already finished");
        return -1;
    }
    if (bw_command_writer_check_no_series(w) < 0 || bw_command_writer_ensure_buffer(w) < 0)
        return -1;
    size_t start = w->buf.len;
    if (w->open == BW_OPEN_COUNTERS && bw_command_batch_close(&w->buf) < 0) {
        w->buf.len = start;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int bw_command_writer_begin_command(bw_command_writer *w) {
    size_t start = w->buf.data != NULL ? w->buf.len : 0;
    if (bw_command_writer_end_open(w) < 0)
        return -1;
    if (bw_buf_append(&w->buf, w->started ? "," : "[", 1) < 0) {
        w->buf.len = start;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int bw_command_writer_finish(bw_command_writer *w) {
    if (w->finished)
        return 0;
    if (bw_command_writer_check_no_series(w) < 0 || bw_command_writer_ensure_buffer(w) < 0)
        return -1;
    size_t start = w->buf.len;
    int rc = w->open == BW_OPEN_COUNTERS ? bw_command_batch_close(&w->buf) : 0;
    if (rc == 0)
        rc = w->started ? BW_BUF_APPEND_LITERAL(&w->buf, "]") : BW_BUF_APPEND_LITERAL(&w->buf, "[]");
    if (rc < 0) {
        w->buf.len = start;
        PyErr_NoMemory();
        return -1;
    }
    w->bytes += w->buf.len - start;
    bw_command_writer_command_done(w);
    w->finished = 1;
    return 0;
}

char *bw_command_writer_detach(bw_command_writer *w, size_t *len, size_t *cap) {
    *len = 0;
    *cap = 0;
    if (w->buf.data == NULL || w->buf.len == 0)
        return NULL;
    /* give back the unused tail: what is handed over is what the queue holds */
    if (w->buf.cap - w->buf.len > 4096) {
        char *shrunk = realloc(w->buf.data, w->buf.len);
        if (shrunk != NULL) {
            w->buf.data = shrunk;
            w->buf.cap = w->buf.len;
        }
    }
    *cap = w->buf.cap;
    w->handovers++;
    bw_json_runs_clear(&w->runs);
    return bw_buf_detach(&w->buf, len);
}

/* ---- pre-encoded commands (BulkWriter.store_encoded) ---- */

int bw_command_writer_begin_encoded(bw_command_writer *w, Py_ssize_t count) {
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count must not be negative, not %zd", count);
        return -1;
    }
    size_t start = w->buf.data != NULL ? w->buf.len : 0;
    if (bw_command_writer_begin_command(w) < 0)
        return -1;
    bw_command_writer_command_done(w);
    w->commands += count;
    w->bytes += w->buf.len - start;
    return 0;
}
