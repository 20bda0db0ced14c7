"""Bulk insert over TLS against plain HTTP: the same documents into the loopback server, once on
``http://`` and once on ``https://`` with a required client certificate, each server in a
process of its own.

    python benchmarks/bench_tls.py                          # 5,000 docs of 1024 dims, 5 rounds
    python benchmarks/bench_tls.py --docs 2000 --rounds 3 --modes plain

Contenders: ``http`` (the baseline), ``tls`` (``certificate=``/``ca=``: bulkwire's own TLS,
the body pump writing through it with the GIL released) and ``tls-ssl_context`` (a Python
``ssl.SSLContext``: Python's ssl and the Python sender). Each round runs every contender once,
in an order that rotates from round to round, on the same entities (class instances with a
1024-float vector, as in bench_bulk_insert.py); the figure is the median documents/s, and the
ratio the median of the per-round ratios to ``http`` in the same round. The certificates are made for the run
(``bulkwire.testing.pki``, EC P-256; the handshake negotiates TLS 1.3 with AES-GCM).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from _common import print_command  # noqa: E402 (the checkout's in-place build, when there is one)
from _rounds import load_average  # noqa: E402
from bench_bulk_insert import make_entities  # noqa: E402

CONTENDERS = ("http", "tls", "tls-ssl_context")


def serve(pki_dir: str, tls: bool) -> None:
    """The loopback server (counting only), on HTTPS requiring a client certificate when tls."""
    from types import SimpleNamespace

    from bulkwire.testing import LoopbackServer
    from bulkwire.testing.pki import server_context

    context = None
    if tls:
        pki = SimpleNamespace(ca=os.path.join(pki_dir, "ca.pem"),
                              server_cert=os.path.join(pki_dir, "server.pem"),
                              server_key=os.path.join(pki_dir, "server.key"))
        context = server_context(pki)
    with LoopbackServer("bench", keep_body=False, ssl_context=context) as server:
        print(server.url, flush=True)
        try:
            sys.stdin.read()  # until the benchmark closes our stdin
        except KeyboardInterrupt:
            pass


@contextlib.contextmanager
def server_process(pki_dir: str, tls: bool):
    args = [sys.executable, os.path.abspath(__file__), "--serve", pki_dir] + (["--tls"] if tls else [])
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(10)


def insert(url: str, entities: list, compress: bool, **tls) -> float:
    """Documents per second of one bulk insert."""
    import bulkwire

    start = time.perf_counter()
    with bulkwire.BulkInsert(url, "bench", compress=compress, timeout=120, **tls) as bulk:
        store = bulk.store
        for entity in entities:
            store(entity)
    return len(entities) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=["plain", "gzip"], choices=["plain", "gzip"])
    parser.add_argument("--serve", metavar="PKI_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--tls", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tls)
        return

    from bulkwire import _core
    from bulkwire.testing.pki import make_pki

    print_command()
    print(f"{args.docs:,} documents of {args.dim} dims, {args.rounds} rounds; "
          f"TLS: {_core.TLS_LIBRARY} (Python's ssl: {ssl.OPENSSL_VERSION})")
    entities = make_entities(args.docs, args.dim)
    with tempfile.TemporaryDirectory() as pki_dir:
        pki = make_pki(pki_dir)
        context = ssl.create_default_context(cafile=pki.ca)
        context.load_cert_chain(pki.client)
        with server_process(pki_dir, False) as http_url, server_process(pki_dir, True) as https_url:
            runs = {
                "http": lambda compress: insert(http_url, entities, compress),
                "tls": lambda compress: insert(https_url, entities, compress,
                                               certificate=pki.client, ca=pki.ca),
                "tls-ssl_context": lambda compress: insert(https_url, entities, compress,
                                                           ssl_context=context),
            }
            print(f"{'mode':6} {'contender':16} {'docs/s':>10} {'vs http':>8}")
            for mode in args.modes:
                compress = mode == "gzip"
                for name in CONTENDERS:  # warm-up: connections, pools, caches
                    runs[name](compress)
                rates = {name: [] for name in CONTENDERS}
                for round_index in range(args.rounds):  # the order rotates round by round
                    start = round_index % len(CONTENDERS)
                    for name in CONTENDERS[start:] + CONTENDERS[:start]:
                        rates[name].append(runs[name](compress))
                print(f"{mode}: load average {load_average()} after the rounds")
                for name in CONTENDERS:
                    ratio = statistics.median(r / h for r, h in zip(rates[name], rates["http"]))
                    print(f"{mode:6} {name:16} {statistics.median(rates[name]):>10,.0f} {ratio:>7.2f}x")


if __name__ == "__main__":
    main()
