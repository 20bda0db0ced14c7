"""``import bulkwire`` loads the encoder alone: the bulk insert's HTTP stack, pyarrow and NumPy
are imported when something first needs them, and NumPy's C API is loaded the first time an
object may be an array. Each check runs in a fresh process, where nothing was imported yet."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import bulkwire

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))
HEAVY = ("numpy", "pyarrow", "http.client", "email.parser", "ssl")


def run_fresh(code: str) -> str:
    """The standard output of a fresh interpreter running code (which must succeed)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": PACKAGE_PARENT,
                               "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def imported_heavy(code: str) -> list:
    out = run_fresh(textwrap.dedent(code) + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    return out.strip().splitlines()[-1]


def test_encoding_imports_no_heavy_module():
    code = """
        import datetime, enum
        import bulkwire

        class Color(enum.Enum):
            RED = "red"

        class Thing:
            def __init__(self):
                self.name, self.at, self.tags = "a", datetime.datetime(2024, 5, 1), {"x"}

        assert bulkwire.dumps({"a": [1, 2.5, None, True], "c": Color.RED, "t": Thing()}) == (
            b'{"a": [1, 2.5, null, true], "c": "red", '
            b'"t": {"name": "a", "at": "2024-05-01T00:00:00.0000000", "tags": ["x"]}}')
        assert bulkwire.Encoder(default=None).encode([1]) == b"[1]"
        assert bulkwire.to_builtins({1: (2,)}) == {"1": [2]}
        try:
            bulkwire.dumps(object())
        except TypeError as error:
            assert "is not JSON serializable" in str(error)
    """
    assert imported_heavy(code) == "[]"


def libzstd_reads_zstd_pages() -> bool:
    from bulkwire import _core

    return any(name == "ZSTD" and covered for name, covered, _ in _core.PARQUET_CODECS.values())


def test_the_command_line_version_imports_no_heavy_module():
    code = """
        import sys
        from bulkwire.__main__ import main
        sys.argv = ["bulkwire", "--version"]
        try:
            main()
        except SystemExit as done:
            assert done.code in (0, None)
    """
    out = run_fresh(code)
    assert out.startswith(f"bulkwire {bulkwire.__version__}\n")
    # a build without libzstd says which Python decompressor reads zstd pages: pyarrow's
    # codec, which only importing pyarrow can tell; with libzstd, nothing heavy is imported
    assert imported_heavy(code) == ("[]" if libzstd_reads_zstd_pages() else
                                    "['numpy', 'pyarrow']")
    # the report alone: not the bulk insert writer the other commands' defaults come from
    writer = run_fresh(textwrap.dedent(code) + "\nimport sys\nprint('bulkwire.bulk' in sys.modules)")
    assert writer.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("argv", [["--version"], ["--version", "load", "x"], ["--vers"]])
def test_the_version_comes_first_as_the_parser_takes_it(argv, capsys):
    from bulkwire import cli

    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"bulkwire {bulkwire.__version__}\n")


def test_every_public_name_imports_on_first_use():
    code = """
        import bulkwire
        names = list(bulkwire.__all__)
        assert set(names) <= set(dir(bulkwire))
        for name in names:
            exec(f"from bulkwire import {name}")
        assert bulkwire.errors.RowError is bulkwire.RowError  # a submodule, as before
        assert bulkwire.load.load_parquet is bulkwire.load_parquet
        try:
            bulkwire.no_such_name
        except AttributeError as error:
            assert "no_such_name" in str(error)
        else:
            raise AssertionError("no AttributeError")
        print("ok")
    """
    assert run_fresh(code).strip() == "ok"


def test_arrays_encode_once_numpy_is_imported_after_the_first_dumps():
    code = """
        import sys
        import bulkwire
        assert bulkwire.dumps({"a": 1}) == b'{"a": 1}'
        assert "numpy" not in sys.modules
        import numpy as np
        assert bulkwire.dumps({"v": np.arange(3, dtype="f4"), "s": np.float64(0.5),
                               "i": np.int8(-3), "m": np.eye(2, dtype=">i2")}) == (
            b'{"v": [0.0, 1.0, 2.0], "s": 0.5, "i": -3, "m": [[1, 0], [0, 1]]}')
        assert bulkwire.dumps(np.array(["x", None], dtype=object)) == b'["x", null]'
        print("ok")
    """
    assert run_fresh(code).strip() == "ok"


def test_an_array_made_in_a_thread_racing_the_first_dumps():
    """Threads import NumPy and encode arrays while others make their first calls: every
    output is the round trip's, whichever thread loads the C API."""
    code = """
        import json, sys, threading
        sys.setswitchinterval(1e-6)
        import bulkwire

        barrier = threading.Barrier(6)
        outputs, errors = [], []

        def with_numpy():
            try:
                barrier.wait()
                import numpy as np
                a = np.linspace(0, 1, 7, dtype="f4")
                outputs.append((bulkwire.dumps({"a": a}), json.dumps({"a": a.tolist()}).encode()))
            except BaseException as error:
                errors.append(error)

        def without():
            try:
                barrier.wait()
                for i in range(2000):
                    # a set reaches the conventions' NumPy check, the gate
                    doc = {"i": i, "f": i / 3, "s": {"x" * (i % 5)}}
                    expected = json.dumps({**doc, "s": list(doc["s"])}).encode()
                    outputs.append((bulkwire.dumps(doc), expected))
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=with_numpy) for _ in range(3)]
        threads += [threading.Thread(target=without) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert all(ours == theirs for ours, theirs in outputs)
        print(len(outputs))
    """
    assert int(run_fresh(code).strip()) == 3 + 3 * 2000


def test_vector_codec_without_numpy_then_with_it():
    code = """
        import sys
        import bulkwire
        codec = bulkwire.VectorCodec("float", 3)
        blob = codec.serialize([1.0, 2.0, 3.0])
        assert codec.serialize((1.0, 2.0, 3.0)) == blob
        assert "numpy" not in sys.modules
        values = codec.deserialize(blob)  # an array: NumPy is imported for it
        import numpy as np
        assert isinstance(values, np.ndarray) and values.tolist() == [1.0, 2.0, 3.0]
        assert codec.serialize(np.array([1, 2, 3], dtype="f4")) == blob
        print("ok")
    """
    assert run_fresh(code).strip() == "ok"


def test_a_load_imports_only_its_own_target_kind():
    """A load into a file imports no other kind's module (the CQL loader, the JSON Lines
    writer); naming a kind imports its module."""
    out = run_fresh("""
        import os, sys, tempfile
        import bulkwire
        from bulkwire import targets

        folder = tempfile.mkdtemp()
        path = bulkwire.sample_parquet(os.path.join(folder, "s.parquet"), rows=10, dim=4)
        bulkwire.load_parquet(path, targets.request_file(os.path.join(folder, "o.json")))
        print(sorted(m for m in sys.modules if m.startswith("bulkwire.load.")
                     and ("cql" in m or "jsonl" in m)))
        targets.cql
        print("bulkwire.load.cql_target" in sys.modules)
    """).split()
    assert out == ["[]", "True"]
