"""The ``bulkwire`` command line. Each subcommand is a function taking parsed arguments."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Sequence


def _sample_documents(count: int, dim: int, seed: int) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.random((count, dim), dtype=np.float32)
    return [{"Name": f"doc-{i}", "Rank": i, "Score": float(i) / 3, "Active": i % 2 == 0,
             "Embedding": vectors[i]} for i in range(count)]


def cmd_demo(args: argparse.Namespace) -> int:
    """Encode a generated sample of documents and report what it did and how fast."""
    from . import dumps

    docs = _sample_documents(args.docs, args.dim, args.seed)
    start = time.perf_counter()
    total = sum(len(dumps(d, float32=args.float32)) for d in docs)
    seconds = time.perf_counter() - start
    print(f"encoded {len(docs):,} documents with {args.dim}-dim float32 vectors "
          f"(float32={args.float32}): {total:,} bytes in {seconds:.3f} s, "
          f"{len(docs) / seconds:,.0f} documents/s, {total / seconds / 1e6:,.1f} MB/s")
    return 0


#: Exit codes of ``bulkwire load`` and ``bulkwire sample``.
EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"bulkwire: error: {message}", file=sys.stderr)
    return code


def _parse_take(text: str | None) -> list | None:
    """``--take 1,5,7`` or ``--take @file`` (whitespace/comma separated indices)."""
    if text is None:
        return None
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    items = [t for t in text.replace(",", " ").split() if t]
    out = []
    for pos, item in enumerate(items):
        try:
            out.append(int(item))
        except ValueError:
            raise ValueError(f"--take: take[{pos}] = {item!r} is not an integer") from None
    return out


def cmd_sample(args: argparse.Namespace) -> int:
    """Write a seeded sample Parquet file (int64 id, fixed_size_list<float32>[dim])."""
    try:
        from .parquet import sample_parquet

        start = time.perf_counter()
        path = sample_parquet(args.path, rows=args.rows, dim=args.dim, seed=args.seed,
                              row_group_rows=args.row_group)
    except ImportError as exc:
        return _fail(str(exc))
    except (OSError, ValueError, TypeError) as exc:
        return _fail(str(exc))
    print(f"wrote {args.rows:,} rows x {args.dim} float32 dims (seed {args.seed}) to {path}: "
          f"{os.path.getsize(path):,} bytes in {time.perf_counter() - start:.2f} s")
    return EXIT_OK


def cmd_load(args: argparse.Namespace) -> int:
    """Load a Parquet / Arrow IPC file with bulk insert (or write the request body to a file)."""
    try:
        from .load import load_parquet

        if args.url is None and args.database is not None:
            return _fail("--database needs --url", EXIT_USAGE)
        if args.url is not None and args.database is None:
            return _fail("--url needs --database", EXIT_USAGE)
        if args.ca is not None and args.insecure:
            return _fail("--ca and --insecure exclude each other", EXIT_USAGE)
        if args.key is not None and args.certificate is None:
            return _fail("--key needs --certificate", EXIT_USAGE)
        certificate = (args.certificate if args.key is None else (args.certificate, args.key))
        try:
            url = _parse_urls(args.url)
        except ValueError as exc:
            return _fail(str(exc), EXIT_USAGE)
        columns = None if args.columns is None else args.columns.split(",")
        if columns is not None and not all(columns):
            return _fail(f"--columns {args.columns!r}: empty column name (give the names "
                         f"separated by single commas)", EXIT_USAGE)
        result = load_parquet(
            args.path, url=url, database=args.database, collection=args.collection,
            id_column=args.id_column, id_prefix=args.id_prefix, vector_column=args.vector_column,
            columns=columns, compress=args.gzip, batch_rows=args.batch_rows,
            take=_parse_take(args.take), out=args.out, float32=args.float32,
            progress=not args.quiet, certificate=certificate,
            ca=False if args.insecure else args.ca)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except ImportError as exc:
        return _fail(str(exc))
    except FileNotFoundError as exc:
        return _fail(str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) and len(exc.args) == 1
                     else str(exc))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        return _fail(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc))
    except (ConnectionError, RuntimeError, OSError) as exc:
        return _fail(str(exc), EXIT_SERVER)
    print(result.summary())
    return EXIT_OK


def _parse_urls(values: list | None) -> str | list | None:
    """The ``--url`` values (repeated, or comma-separated) as ``load_parquet`` takes them: one
    URL as a str (that server alone), several as a list (a cluster's nodes)."""
    if values is None:
        return None
    urls = [url.strip() for value in values for url in value.split(",")]
    if not all(urls):
        raise ValueError(f"--url {','.join(values)!r}: empty URL (give one URL per --url, or "
                         f"the URLs separated by single commas)")
    return urls[0] if len(urls) == 1 else urls


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bulkwire", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="encode a generated sample of documents")
    demo.add_argument("--docs", type=int, default=10_000, help="documents (default 10000)")
    demo.add_argument("--dim", type=int, default=1024, help="vector dimension (default 1024)")
    demo.add_argument("--seed", type=int, default=42)
    demo.add_argument("--float32", choices=["widen", "shortest"], default="widen")
    demo.set_defaults(func=cmd_demo)

    sample = sub.add_parser("sample", help="write a seeded sample Parquet file of embeddings",
                            description="Write PATH: int64 id and a fixed_size_list<float32>[DIM] "
                                        "column 'emb' uniform in [0, 1) from the seed.")
    sample.add_argument("path", metavar="PATH")
    sample.add_argument("--rows", type=int, default=10_000, help="rows (default 10000)")
    sample.add_argument("--dim", type=int, default=1024, help="vector dimension (default 1024)")
    sample.add_argument("--seed", type=int, default=42)
    sample.add_argument("--row-group", type=int, default=1024, help="rows per row group (default 1024)")
    sample.set_defaults(func=cmd_sample)

    load = sub.add_parser(
        "load", help="load a Parquet / Arrow IPC file with bulk insert",
        description="Load PATH (Parquet or Arrow IPC) with bulk insert: one document per row. "
                    "Without --url, write the exact request body to --out (replayable later). "
                    "Exit codes: 0 done, 1 bad input (file, column, row), 2 usage, "
                    "3 server or transport error, 130 interrupted.")
    load.add_argument("path", metavar="PATH")
    load.add_argument("--url", action="append",
                      help="server URL; repeat it (or separate URLs by commas) for the nodes of a "
                           "cluster: the topology is asked of the first that answers. Without "
                           "--url the request body goes to --out")
    load.add_argument("--database", help="database name (with --url)")
    load.add_argument("--certificate", metavar="PEM",
                      help="client certificate for an https:// --url: a PEM file holding the "
                           "certificate and its private key (or the certificate alone, with --key)")
    load.add_argument("--key", metavar="PEM", help="the client certificate's private key, when "
                                                   "not in the --certificate file")
    load.add_argument("--ca", metavar="PEM", help="PEM bundle of the CAs that sign the server's "
                                                  "certificate (default: the system's)")
    load.add_argument("--insecure", action="store_true",
                      help="do not verify the server's certificate (encrypted, not authenticated)")
    load.add_argument("--out", help="output file (default <name>.bulk.json, or .bulk.json.gz)")
    load.add_argument("--collection", default="Embeddings", help="@collection (default Embeddings)")
    load.add_argument("--id-column", default="id", help="id column (default id)")
    load.add_argument("--id-prefix", help="prefix of every id (default: <collection in lower "
                                          "case>/ for integer ids, none for strings)")
    load.add_argument("--vector-column", help="the vector column (default: the only list column)")
    load.add_argument("--columns", help="comma-separated document fields (default: all but the id)")
    load.add_argument("--gzip", action="store_true", help="gzip the body (fastest level)")
    load.add_argument("--batch-rows", type=int, help="rows per Arrow batch (default: ~4 MiB of text)")
    load.add_argument("--take", help="only these row indices: 1,5,9 or @file")
    load.add_argument("--float32", choices=["widen", "shortest"], default="widen",
                      help="float32 vector text (default widen: the repr of the double)")
    load.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    load.set_defaults(func=cmd_load)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``bulkwire`` and ``python -m bulkwire``.

    >>> main(["demo", "--docs", "10", "--dim", "4"])  # doctest: +ELLIPSIS
    encoded 10 documents ...
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["demo", *(argv or [])])
    for name in ("docs", "dim", "row_group"):
        if getattr(args, name, 1) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if getattr(args, "rows", 0) < 0:
        parser.error("--rows must not be negative")
    if getattr(args, "batch_rows", None) is not None and args.batch_rows <= 0:
        parser.error("--batch-rows must be positive")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
