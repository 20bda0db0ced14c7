/* CommandWriter's other commands (py_writer_object.h): counters, time series, attachments
   and pieces of bytes carried as they are; bulk_commands.h frames them. */
#include "py_writer_object.h"

#include "py_bulk_commands.h"
#include "py_piece.h"

#include "bulk_commands.h"

#include <string.h>

/* ---- counters, time series and attachments (bulk_commands.h frames them) ---- */

/* The checks of every command method after command_writer_enter. 0, or -1 with an exception
   set. */
static int command_writer_can_write(WriterObject *self) {
    if (self->queue == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this command needs a writer made with queue=");
        return -1;
    }
    if (self->w.finished) {
        PyErr_SetString(PyExc_RuntimeError, "the bulk insert body is already finished");
        return -1;
    }
    return 0;
}

/* The checks of a command method with a fixed number of arguments: `nargs` given where it
   takes `wanted` (TypeError: "<signature>, <nargs> given"), then command_writer_can_write.
   0, or -1 with an exception set. */
static int command_writer_can_call(WriterObject *self, Py_ssize_t nargs, Py_ssize_t wanted,
                                   const char *signature) {
    if (nargs != wanted) {
        PyErr_Format(PyExc_TypeError, "%s, %zd given", signature, nargs);
        return -1;
    }
    return command_writer_can_write(self);
}

/* New reference: True once the command is in the body and a full buffer (if any) was handed
   over; None when the consumer is gone (the buffer was dropped); NULL when the hand-over was
   interrupted (handover_interrupted). The official client's flush points: after each
   operation. */
static PyObject *command_writer_written(WriterObject *self) {
    int handed_over = 1;
    if (bw_command_writer_over_threshold(&self->w))
        handed_over = bw_writer_hand_over(self);
    if (handed_over < 0)
        return NULL;
    return Py_NewRef(handed_over ? Py_True : Py_None);
}

/* New reference (see command_writer_written): an increment or entry was written from `start`
   as operation number in_batch + 1 of its command. */
static PyObject *command_writer_operation_written(WriterObject *self, size_t in_batch, size_t start) {
    self->w.in_batch = in_batch + 1;
    self->w.bytes += self->w.buf.len - start;
    return command_writer_written(self);
}

/* NULL (the exception is set): what a failed operation wrote from `start` is taken back. */
static PyObject *command_writer_undo(bw_command_writer *w, size_t start) {
    w->buf.len = start;
    return NULL;
}

/* Whether the counters command open for `open_id` takes increments of `id` too: the same id,
   compared as the official client compares it (lower-cased). 1, 0, or -1 with an exception. */
static int same_counters_document(PyObject *open_id, PyObject *id) {
    if (open_id == id)
        return 1;
    int equal = PyUnicode_Compare(open_id, id);
    if (equal == 0 || PyErr_Occurred())
        return equal == 0 ? 1 : -1;
    /* str.lower itself: a subclass's own lower() would run Python code in the middle */
    PyObject *a = PyObject_CallMethod((PyObject *)&PyUnicode_Type, "lower", "O", open_id);
    PyObject *b = a != NULL ? PyObject_CallMethod((PyObject *)&PyUnicode_Type, "lower", "O", id)
                            : NULL;
    int same = b != NULL ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return same;
}

/* increment(id, name, delta) -> True | None (a new reference; see command_writer_written). */
static PyObject *increment_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (command_writer_can_call(self, nargs, 3,
                                "increment() takes 3 arguments (id, name, delta)") < 0)
        return NULL;
    PyObject *id = args[0];
    Py_ssize_t id_len, name_len;
    int64_t delta;
    const char *id_text = bw_command_text(id, "id", &id_len);
    if (id_text == NULL)
        return NULL;
    const char *name_text = bw_command_text(args[1], "name", &name_len);
    if (name_text == NULL || bw_counter_delta(args[2], &delta) < 0 ||
        bw_command_writer_check_no_series(&self->w) < 0)
        return NULL;
    bw_command_writer *w = &self->w;
    int same = w->open == BW_OPEN_COUNTERS ? same_counters_document(self->counters_id, id) : 0;
    if (same < 0 || bw_command_writer_ensure_buffer(w) < 0)
        return NULL;
    size_t start = w->buf.len, in_batch = w->in_batch;
    if (!same) {
        if (bw_command_writer_begin_command(w) < 0)
            return NULL;
        if (bw_counters_open(&w->buf, id_text, (size_t)id_len) < 0)
            goto nomem;
        in_batch = 0;
    } else if (in_batch >= BW_COMMAND_BATCH_MAX) {
        Py_ssize_t open_len;
        const char *open_text = PyUnicode_AsUTF8AndSize(self->counters_id, &open_len);
        if (open_text == NULL)
            goto error;
        if (BW_BUF_APPEND_LITERAL(&w->buf, "]}},") < 0 ||
            bw_counters_open(&w->buf, open_text, (size_t)open_len) < 0)
            goto nomem;
        in_batch = 0;
    }
    if (bw_counter_increment(&w->buf, in_batch > 0, name_text, (size_t)name_len, delta) < 0)
        goto nomem;
    if (!same) {
        bw_command_writer_command_done(w);
        w->open = BW_OPEN_COUNTERS;
        Py_XSETREF(self->counters_id, Py_NewRef(id));
    }
    return command_writer_operation_written(self, in_batch, start);
nomem:
    PyErr_NoMemory();
error:
    return command_writer_undo(w, start);
}

/* Ends the batch of the open counters or time series command (its closing bytes, 3 of
   them, counted in the body). 0, or -1 with an exception set. */
static int close_open_batch(bw_command_writer *w) {
    if (bw_command_writer_ensure_buffer(w) < 0)
        return -1;
    if (bw_command_batch_close(&w->buf) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    w->bytes += 3;
    return 0;
}

/* series_begin(id, name) -> True (a new reference). The time series opens; nothing is written
   before its first entry, but an open counters command is closed now, as the official client
   closes it. */
static PyObject *series_begin_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (command_writer_can_call(self, nargs, 2,
                                "series_begin() takes 2 arguments (id, name)") < 0)
        return NULL;
    Py_ssize_t len;
    if (bw_command_text(args[0], "id", &len) == NULL || bw_command_text(args[1], "name", &len) == NULL)
        return NULL;
    bw_command_writer *w = &self->w;
    if (w->open == BW_OPEN_SERIES) {
        PyErr_SetString(PyExc_RuntimeError, "a time series of this bulk insert is already open: "
                                            "close it (leave its with block) first");
        return NULL;
    }
    if (w->open == BW_OPEN_COUNTERS && close_open_batch(w) < 0)
        return NULL;
    w->open = BW_OPEN_SERIES;
    w->open_written = 0;
    w->in_batch = 0;
    Py_XSETREF(self->series_id, Py_NewRef(args[0]));
    Py_XSETREF(self->series_name, Py_NewRef(args[1]));
    Py_RETURN_TRUE;
}

/* series_append(timestamp, values, tag) -> True | None (a new reference; see
   command_writer_written): one entry of the open time series. */
static PyObject *series_append_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (command_writer_can_call(self, nargs, 3,
                                "series_append() takes 3 arguments (timestamp, values, tag)") < 0)
        return NULL;
    bw_command_writer *w = &self->w;
    if (w->open != BW_OPEN_SERIES) {
        PyErr_SetString(PyExc_RuntimeError, "no time series is open");
        return NULL;
    }
    PyObject *values = args[1], *tag = args[2];
    int64_t unix_ms;
    Py_ssize_t tag_len = 0, id_len, name_len;
    const char *tag_text = NULL;
    /* a tzinfo's utcoffset() is Python code: a call back into this writer from it is refused */
    int converted = bw_timestamp_unix_ms(args[0], &unix_ms);
    if (converted < 0)
        return NULL;
    if (!PyList_Check(values) && !PyTuple_Check(values)) {
        PyErr_Format(PyExc_TypeError, "values must be a list or tuple, not %.100s",
                     Py_TYPE(values)->tp_name);
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(values) == 0) {
        PyErr_SetString(PyExc_ValueError, "values must hold at least one value");
        return NULL;
    }
    if (tag != Py_None && (tag_text = bw_command_text(tag, "tag", &tag_len)) == NULL)
        return NULL;
    const char *id_text = PyUnicode_AsUTF8AndSize(self->series_id, &id_len);
    const char *name_text = id_text != NULL ? PyUnicode_AsUTF8AndSize(self->series_name, &name_len)
                                            : NULL;
    if (name_text == NULL || bw_command_writer_ensure_buffer(w) < 0)
        return NULL;
    size_t start = w->buf.len, in_batch = w->in_batch;
    if (!w->open_written || in_batch >= BW_COMMAND_BATCH_MAX) {
        int rc = !w->open_written ? bw_buf_append(&w->buf, w->started ? "," : "[", 1)
                                  : BW_BUF_APPEND_LITERAL(&w->buf, "]}},");
        if (rc < 0 || bw_time_series_open(&w->buf, id_text, (size_t)id_len, name_text,
                                          (size_t)name_len) < 0)
            goto nomem;
        in_batch = 0;
    }
    if (bw_time_series_entry_open(&w->buf, in_batch > 0, unix_ms,
                                  (size_t)PySequence_Fast_GET_SIZE(values)) < 0)
        goto nomem;
    if (bw_series_values(&w->buf, values) < 0)
        goto error;
    if (bw_time_series_entry_close(&w->buf, tag_text, (size_t)tag_len) < 0)
        goto nomem;
    w->started = 1;
    w->open_written = 1;
    return command_writer_operation_written(self, in_batch, start);
nomem:
    PyErr_NoMemory();
error:
    return command_writer_undo(w, start);
}

/* series_end() -> None (a new reference): closes the open time series' command, if any. */
static PyObject *series_end_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args, (void)nargs;
    bw_command_writer *w = &self->w;
    if (w->open != BW_OPEN_SERIES)
        Py_RETURN_NONE;
    if (w->open_written && close_open_batch(w) < 0)
        return NULL;
    w->open = BW_OPEN_NONE;
    w->open_written = 0;
    Py_CLEAR(self->series_id);
    Py_CLEAR(self->series_name);
    Py_RETURN_NONE;
}

/* Hands `item` (a buffer-protocol object of the caller's) over to the queue as a piece of the
   body of its own. As bw_writer_hand_over: 1, 0 or -1. */
static int command_writer_hand_over_item(WriterObject *self, PyObject *item) {
    int taken = bw_queue_put_steal(self->queue, Py_NewRef(item));
    if (taken > 0 && PyErr_CheckSignals() < 0)
        taken = -1;
    if (taken < 0)
        self->handover_interrupted = 1;
    return taken;
}

/* 1 when the bytes of `data` cannot change: a bytes object, or a read-only view of one. */
static int is_immutable(PyObject *data) {
    if (PyBytes_CheckExact(data))
        return 1;
    if (!PyMemoryView_Check(data))
        return 0;
    const Py_buffer *view = PyMemoryView_GET_BUFFER(data);
    PyObject *base = PyMemoryView_GET_BASE(data);
    return view->readonly && base != NULL && PyBytes_CheckExact(base) &&
           PyBuffer_IsContiguous(view, 'C');
}

/* The one size-threshold slicer of bytes the body carries as they are (store_encoded's
   pieces, an attachment's bytes). Immutable data (is_immutable) of at least the threshold
   goes out without a copy, after the current buffer: whole below twice the threshold, else
   in views of `threshold` bytes (the last one up to twice that). Anything else is copied: at
   once when smaller than the threshold (as the official client writes an attachment),
   otherwise in parts that fill each buffer just past the threshold, so memory stays bounded.
   1, 0 (the consumer is gone) or -1 with an exception set; on -1 the body is incomplete
   (handover_interrupted). */
static int command_writer_put_slices(WriterObject *self, PyObject *data, const Py_buffer *view) {
    bw_command_writer *w = &self->w;
    const char *bytes = view->buf;
    size_t remaining = (size_t)view->len, threshold = w->threshold;
    int taken = 1;
    if (remaining >= threshold && is_immutable(data)) {
        if (w->buf.len > 0 && (taken = bw_writer_hand_over(self)) <= 0)
            return taken;
        w->bytes += remaining;
        if (remaining < 2 * threshold)
            return command_writer_hand_over_item(self, data);
        PyObject *whole = PyMemoryView_FromObject(data);
        if (whole == NULL)
            goto failed;
        for (size_t offset = 0; taken > 0 && offset < remaining;) {
            size_t size = remaining - offset >= 2 * threshold ? threshold : remaining - offset;
            PyObject *part = PySequence_GetSlice(whole, (Py_ssize_t)offset, (Py_ssize_t)(offset + size));
            if (part == NULL) {
                Py_DECREF(whole);
                goto failed;
            }
            taken = command_writer_hand_over_item(self, part);
            Py_DECREF(part);
            offset += size;
        }
        Py_DECREF(whole);
        return taken;
    }
    while (remaining > 0) {
        if (bw_command_writer_ensure_buffer(w) < 0)
            goto failed;
        size_t part = remaining;
        if (remaining >= threshold) {
            size_t room = w->buf.len < threshold ? threshold - w->buf.len + 1 : 1;
            part = room < remaining ? room : remaining;
        }
        if (bw_buf_append(&w->buf, bytes, part) < 0) {
            PyErr_NoMemory();
            goto failed;
        }
        bytes += part;
        remaining -= part;
        w->bytes += part;
        if (bw_command_writer_over_threshold(w) && (taken = bw_writer_hand_over(self)) <= 0)
            return taken;
    }
    return 1;
failed:
    self->handover_interrupted = 1;
    return -1;
}

/* put_pieces(pieces, count) -> True | None (a new reference; see command_writer_written):
   commands already encoded (BulkWriter.store_encoded checked them: a list of non-empty
   bytes-like pieces whose concatenation is complete commands joined by ','), after the
   separator, through the slicer (command_writer_put_slices). Once the separator is written
   the body holds part of them: a failure then sets handover_interrupted. */
static PyObject *put_pieces_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "put_pieces() takes a list of pieces and a count");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if ((count == -1 && PyErr_Occurred()) || command_writer_can_write(self) < 0)
        return NULL;
    PyObject *pieces = Py_NewRef(args[0]), *result = NULL;
    if (bw_command_writer_begin_encoded(&self->w, count) < 0)
        goto done;
    int taken = 1;
    for (Py_ssize_t i = 0; taken > 0 && i < PyList_GET_SIZE(pieces); i++) {
        PyObject *piece = Py_NewRef(PyList_GET_ITEM(pieces, i));
        Py_buffer view;
        if (PyObject_GetBuffer(piece, &view, PyBUF_SIMPLE) < 0) {
            self->handover_interrupted = 1;
            taken = -1;
        } else {
            taken = command_writer_put_slices(self, piece, &view);
            PyBuffer_Release(&view);
        }
        Py_DECREF(piece);
    }
    if (taken > 0)
        result = command_writer_written(self);
    else if (taken == 0)
        result = Py_NewRef(Py_None);
done:
    Py_DECREF(pieces);
    return result;
}

/* attachment(id, name, data, content_type) -> True | None (a new reference; see
   command_writer_written): the AttachmentPUT command, then data's raw bytes. */
static PyObject *attachment_call(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (command_writer_can_call(self, nargs, 4,
                                "attachment() takes 4 arguments (id, name, data, content_type)") < 0)
        return NULL;
    PyObject *data = args[2], *content_type = args[3], *result = NULL;
    Py_ssize_t id_len, name_len, type_len = 0;
    const char *type_text = NULL;
    const char *id_text = bw_command_text(args[0], "id", &id_len);
    const char *name_text = id_text != NULL ? bw_command_text(args[1], "name", &name_len) : NULL;
    if (name_text == NULL)
        return NULL;
    if (content_type != Py_None &&
        (type_text = bw_command_text(content_type, "content_type", &type_len)) == NULL)
        return NULL;
    if (PyUnicode_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "attachment_bytes must be a bytes-like object, not str "
                                         "(encode it)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "attachment_bytes must be a bytes-like object, not "
                                          "%.100s", Py_TYPE(data)->tp_name);
        }
        return NULL;
    }
    bw_command_writer *w = &self->w;
    size_t before = 0;
    int taken = -1;
    if (bw_command_writer_ensure_buffer(w) < 0)
        goto cleanup;
    before = w->buf.len;
    if (bw_command_writer_begin_command(w) < 0)
        goto cleanup;
    if (bw_attachment_header(&w->buf, id_text, (size_t)id_len, name_text, (size_t)name_len,
                             type_text, (size_t)type_len, (uint64_t)view.len) < 0) {
        w->buf.len = before;
        PyErr_NoMemory();
        goto cleanup;
    }
    w->bytes += w->buf.len - before;
    bw_command_writer_command_done(w);
    taken = 1;
    if (bw_command_writer_over_threshold(w))
        taken = bw_writer_hand_over(self);
    if (taken > 0)
        taken = command_writer_put_slices(self, data, &view);
    if (taken >= 0)
        result = Py_NewRef(taken ? Py_True : Py_None);
cleanup:
    PyBuffer_Release(&view);
    return result;
}

/* The methods, run under command_writer_run. */
WRITER_FASTCALL(increment)
WRITER_FASTCALL(series_begin)
WRITER_FASTCALL(series_append)
WRITER_NOARGS(series_end)
WRITER_FASTCALL(attachment)
WRITER_FASTCALL(put_pieces)
