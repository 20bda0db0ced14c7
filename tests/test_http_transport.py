"""The HTTP transport (bulkwire.transport) against what a process and a server may do to it:
descriptors past select()'s reach, interim answers, a kept connection the server let go of,
request heads that would split."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "pkg")
TIMEOUT = 5.0


def run_child(code: str) -> str:
    """Runs ``code`` in a fresh interpreter with the package on its path; its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG, os.path.join(ROOT, "tests")]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# ---- a process holding more than FD_SETSIZE descriptors ----

def test_inserts_work_with_their_sockets_past_descriptor_1024():
    """Every socket of the insert gets a descriptor above 1024 (where select() refuses to
    look): the kept connection's idle check and the ssl_context= sender's check for an
    early answer both work there, and every document is stored, on every sender."""
    out = run_child("""
        import os, resource, ssl, tempfile
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 2048:
            raise SystemExit(f"the hard limit of open files is {hard}: too low for the test")
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096 if hard == resource.RLIM_INFINITY
                                                    else min(hard, 4096), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        assert min(held[-5:]) > 1024
        import bulkwire
        from bulkwire.testing import LoopbackServer
        from bulkwire.testing.pki import make_pki, server_context
        with tempfile.TemporaryDirectory() as folder:
            pki = make_pki(folder)
            context = ssl.create_default_context(cafile=pki.ca)
            context.load_cert_chain(pki.client_cert, pki.client_key)
            senders = {"http": (None, {}),
                       "https": (server_context(pki), {"certificate": pki.client, "ca": pki.ca}),
                       "ssl_context": (server_context(pki), {"ssl_context": context})}
            for name, (server_tls, options) in senders.items():
                with LoopbackServer(ssl_context=server_tls) as server:
                    try:
                        for round in range(2):  # the second insert finds the sender kept
                            with bulkwire.BulkInsert(server.url, server.database, timeout=5,
                                                     buffer_size=4096, **options) as bulk:
                                for i in range(200):
                                    bulk.store({"n": i, "pad": "x" * 100}, id=f"{round}/{i}")
                    except bulkwire.BulkInsertError as exc:
                        print(name, "failed:", repr(exc))
                    else:
                        print(name, len(server.documents), server.unexpected_errors)
    """)
    assert out.split("\n")[:3] == ["http 400 []", "https 400 []", "ssl_context 400 []"]
