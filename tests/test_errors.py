"""The exceptions of bulkwire: one root (BulkwireError) over every exception of a failed
operation, each class keeping the builtin it stands for; the C core raising them through its
one mapper; pickling across processes; and the numbers the C core hands to Python named."""
import importlib
import inspect
import pickle
import pkgutil
import socket
import sys
import threading
import types

import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core, errors

#: The builtin each class of bulkwire.errors stands for, as documented there: an
#: ``except <builtin>`` written before the root existed keeps catching it.
BUILTIN_OF = {
    "BulkInsertError": RuntimeError, "BulkInsertAborted": RuntimeError,
    "EarlyResponse": RuntimeError, "TransportError": RuntimeError,
    "ConnectError": RuntimeError, "TLSError": RuntimeError,
    "TLSFileError": (RuntimeError, ValueError), "ConnectionLostError": RuntimeError,
    "TransportTimeoutError": RuntimeError, "ServerError": RuntimeError,
    "ProtocolError": RuntimeError, "UnsupportedByServer": RuntimeError,
    "RowError": ValueError, "MalformedFileError": ValueError, "ResumeStateError": ValueError,
    "CqlServerError": RuntimeError, "SchemaMismatchError": ValueError,
    "LoadError": RuntimeError, "BulkInsertTransportError": RuntimeError,
    "BulkInsertConnectError": RuntimeError, "BulkInsertTLSError": RuntimeError,
    "BulkInsertTLSFileError": (RuntimeError, ValueError),
    "BulkInsertConnectionLostError": RuntimeError, "BulkInsertTimeoutError": RuntimeError,
    "BulkInsertServerError": RuntimeError, "BulkInsertProtocolError": RuntimeError,
}


def _bulkwire_modules():
    """Every module of the bulkwire package that imports here (an optional extra that is
    not installed leaves its module out). The loopback emulator (bulkwire.testing) is left
    out: its RequestError is how its handlers answer an error status, never raised to a
    caller of bulkwire."""
    found = [bulkwire]
    for info in pkgutil.iter_modules(bulkwire.__path__, "bulkwire."):
        if info.name.startswith("bulkwire.testing"):
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:
            continue
    return found


def _public_exception_classes():
    """Every exception class a bulkwire module exposes under a public name: defined in
    bulkwire.errors, re-exported elsewhere, or made by the C core."""
    classes = {}
    for module in _bulkwire_modules():
        # dir, not vars: bulkwire's own names are imported when first asked for
        for name in dir(module):
            value = getattr(module, name, None)
            if (not name.startswith("_") and inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__.startswith("bulkwire")):
                classes[f"{module.__name__}.{name}"] = value
    return classes


def test_every_public_exception_class_is_a_bulkwire_error():
    classes = _public_exception_classes()
    # the walk finds the re-exports and the C core's class, not only bulkwire.errors
    assert "bulkwire.ServerError" in classes and "bulkwire._core.TlsError" in classes
    assert set(errors.__all__) <= {name.rsplit(".", 1)[1] for name in classes}
    # a warning reports no failure (the operation goes on: a build's slower fallback)
    warnings = {name for name, cls in classes.items() if issubclass(cls, Warning)}
    assert "bulkwire.config.BuildWarning" in warnings
    outside = sorted(name for name, cls in classes.items()
                     if not issubclass(cls, errors.BulkwireError) and name not in warnings)
    assert outside == []
    assert bulkwire.BulkwireError is errors.BulkwireError and "BulkwireError" in bulkwire.__all__


def test_each_class_keeps_its_builtin_base():
    assert set(BUILTIN_OF) == set(errors.__all__) - {"BulkwireError"}
    for name, builtins in BUILTIN_OF.items():
        cls = getattr(errors, name)
        for builtin in builtins if isinstance(builtins, tuple) else (builtins,):
            assert issubclass(cls, builtin), (name, builtin)
    assert issubclass(_core.TlsError, OSError)
    # the root itself stands for no builtin: except ValueError does not catch a LoadError
    assert not issubclass(errors.LoadError, ValueError)
    assert not issubclass(errors.BulkInsertError, ValueError)
    assert errors.BulkwireError.__bases__ == (Exception,)


def _instance(cls, message, number, data):
    """An instance of cls made as bulkwire makes it, its attributes set from the values."""
    if cls is errors.RowError:
        return cls("col", number, message, take_index=number // 2 or None, source="f.parquet")
    if issubclass(cls, errors.TLSFileError):
        return cls(message, path="c.pem", argument="certificate", reason=message)
    if issubclass(cls, errors.TLSError):
        return cls(message, reason=message, verify_failed=bool(number % 2))
    if cls is errors.CqlServerError:
        error = cls(message, code=number, server_message=message, name="Invalid")
        error.row, error.unacknowledged, error.sent = number, [number, number + 1], number
        return error
    if cls is errors.SchemaMismatchError:
        return cls(message, "col", "int64", "vector<float, 3>")
    if issubclass(cls, (errors.ServerError, errors.EarlyResponse)):
        return cls(message, status=number, body=data)
    if cls is errors.UnsupportedByServer:
        return cls(message, feature="zstd", server_version="5.4.0")
    if cls in (errors.MalformedFileError, errors.ResumeStateError):
        return cls(message, "p.parquet")
    return cls(message)


@settings(max_examples=30, deadline=None)
@given(message=st.text(max_size=40), number=st.integers(0, 10**6), data=st.binary(max_size=40))
def test_pickling_round_trips_every_class(message, number, data):
    """Errors cross worker processes (load workers, Dask, Ray) by pickle: each comes back as
    the same class with the same message and attributes."""
    for name in errors.__all__:
        error = _instance(getattr(errors, name), message, number, data)
        error.__notes__ = ["a note"]
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error) and back.args == error.args
        assert back.__dict__ == error.__dict__


def test_a_load_error_of_any_target_and_a_bulk_inserts_own():
    """LoadError is the root of a load that did not complete; BulkInsertError is RavenDB's
    case of it, and each shared class has a bulk insert's case that is both it and a
    BulkInsertError, made from an instance of it in place (its attributes kept)."""
    shared = [errors.TransportError, errors.ConnectError, errors.TLSError, errors.TLSFileError,
              errors.ConnectionLostError, errors.TransportTimeoutError, errors.ServerError,
              errors.ProtocolError, errors.CqlServerError, errors.BulkInsertError]
    for cls in shared:
        assert issubclass(cls, errors.LoadError)
    for cls in shared[:-2]:  # the CQL target's failures are not a bulk insert's
        assert not issubclass(cls, errors.BulkInsertError), cls
        case = errors.BULK_INSERT_CASES[cls]
        assert issubclass(case, cls) and issubclass(case, errors.BulkInsertError)
        error = _instance(cls, "m", 3, b"d")
        same = errors.bulk_insert_case(error)
        assert same is error and type(same) is case and same.__dict__ == _instance(
            cls, "m", 3, b"d").__dict__
        assert type(pickle.loads(pickle.dumps(same))) is case
    assert not issubclass(errors.CqlServerError, errors.BulkInsertError)
    other = ValueError("x")
    assert errors.bulk_insert_case(other) is other and type(other) is ValueError


def test_with_message_keeps_class_and_attributes():
    error = errors.ServerError("first", status=503, body=b"x")
    again = error.with_message("second")
    assert type(again) is errors.ServerError and str(again) == "second"
    assert (again.status, again.body) == (503, b"x")


# ---------------------------------------------------------------- raised by the C core

def _batch_with_null_id():
    pa = pytest.importorskip("pyarrow")
    return pa.record_batch({"id": pa.array(["a", None]), "x": pa.array([1, 2])})


def test_c_row_error_is_row_error():
    with pytest.raises(errors.RowError) as caught:
        _core.encode_batch(_batch_with_null_id(), "id", ["x"])
    error = caught.value
    assert isinstance(error, errors.BulkwireError) and isinstance(error, ValueError)
    assert (error.column, error.row) == ("id", 1)


def test_c_maps_with_classes_cached_at_module_init(monkeypatch):
    """The mapper looks the classes up once: a raise does not import bulkwire.errors again
    (here it could not: the module is replaced by an empty one)."""
    monkeypatch.setitem(sys.modules, "bulkwire.errors", types.ModuleType("bulkwire.errors"))
    with pytest.raises(errors.RowError):
        _core.encode_batch(_batch_with_null_id(), "id", ["x"])


@settings(max_examples=40, deadline=None)
@given(garbage=st.binary(min_size=0, max_size=64))
def test_c_malformed_parquet_footer_is_malformed_file_error(garbage):
    with pytest.raises(errors.MalformedFileError):
        _core.parquet_index_locations(garbage, 1, 1)


def test_c_short_read_is_malformed_file_error(tmp_path):
    """A file that ends before the size it had when opened: it changed."""
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        with pytest.raises(errors.MalformedFileError):
            _core.read_ranges(f.fileno(), 100, [0], [50])


@pytest.mark.skipif(_core.TLS_LIBRARY is None, reason="this build has no TLS of its own")
def test_c_tls_file_error_is_tls_file_error(tmp_path):
    path = tmp_path / "ca.pem"
    path.write_text("not a certificate\n")
    with pytest.raises(errors.TLSFileError) as caught:
        _core.TlsContext(None, None, str(path), True)
    error = caught.value
    assert (error.argument, error.path) == ("ca", str(path)) and isinstance(error, ValueError)


@pytest.mark.skipif(_core.TLS_LIBRARY is None, reason="this build has no TLS of its own")
def test_c_tls_failure_is_tls_error():
    """A handshake with a peer that answers plain text fails with _core.TlsError: an
    OSError and a BulkwireError."""
    ours, theirs = socket.socketpair()

    def peer():
        theirs.recv(4096)
        theirs.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        theirs.close()

    thread = threading.Thread(target=peer)
    thread.start()
    try:
        context = _core.TlsContext(None, None, None, False)
        with pytest.raises(_core.TlsError) as caught:
            context.connect(ours.fileno(), "localhost", 10.0)
    finally:
        thread.join()
        ours.close()
    assert isinstance(caught.value, errors.BulkwireError) and isinstance(caught.value, OSError)
    assert caught.value.verify_failed is False


# ------------------------------------------------------ numbers named across the C line

def test_pump_outcomes_are_named_from_c():
    from bulkwire.transport import Sent

    outcomes = [_core.PUMP_DONE, _core.PUMP_ANSWERED, _core.PUMP_CLOSED,
                _core.PUMP_ANSWERED_AT_END]
    assert len(set(outcomes)) == 4
    assert (Sent.WHOLE, Sent.ANSWERED_EARLY, Sent.ANSWERED_AT_END) == (
        _core.PUMP_DONE, _core.PUMP_ANSWERED, _core.PUMP_ANSWERED_AT_END)


def test_pump_result_is_named():
    """pump_body's result reads by name: the outcome and what was sent."""
    from bulkwire import BulkWriter

    writer = BulkWriter()
    writer.close()
    ours, theirs = socket.socketpair()
    try:
        sent = _core.pump_body(writer._queue, ours.fileno())
        wire = theirs.recv(4096)
    finally:
        ours.close()
        theirs.close()
    assert isinstance(sent, _core.PumpResult)
    assert sent.outcome == _core.PUMP_DONE and wire == b"2\r\n[]\r\n0\r\n\r\n"
    assert sent.body_bytes == sent.wire_bytes == len(b"[]") and sent.buffers == sent.pieces == 1


def test_parquet_chunk_fields_are_named_from_c(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    from bulkwire.parquet import _ChunkLocation

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": pa.array(["x", "y"] * 50)}), path, use_dictionary=True,
                   write_page_index=True)
    data = path.read_bytes()
    locations = _core.parquet_index_locations(data, 1, 1)
    assert locations.shape == (1, 1, len(_core.PARQUET_CHUNK_FIELDS))
    chunk = _ChunkLocation._make(locations[0, 0].tolist())
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert chunk.dictionary == meta.dictionary_page_offset
    assert chunk.index_offset > 0 and chunk.size == meta.total_compressed_size
    assert chunk.start == min(meta.dictionary_page_offset, meta.data_page_offset)
    assert _core.PARQUET_NO_DICTIONARY != _core.PARQUET_DICTIONARY_UNLOCATED
    assert min(_core.PARQUET_NO_DICTIONARY, _core.PARQUET_DICTIONARY_UNLOCATED) < 0
