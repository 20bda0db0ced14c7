"""The ``bulkwire`` command line. Each subcommand is a function taking parsed arguments.

Exit codes: 0 done; 1 bad input (a file, a column, a row); 2 usage (a bad option or
value: a --url that :mod:`bulkwire.urls` refuses, a --certificate, --key or --ca file that
cannot be used); 3 the server or the network failed; 130 interrupted (Ctrl-C); 143 terminated
(SIGTERM). A command stopped by Ctrl-C or SIGTERM cleans up as after any failure: no partial
output stays, the bulk insert is aborted, worker processes are stopped."""
from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
import signal
import sys
import time
from typing import Iterator, Sequence


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
#: the load completed, with rows rejected (written to --rejected)
EXIT_REJECTED = 4
#: ``bulkwire load`` and ``bulkwire sample`` stopped by SIGTERM (128 + 15, as a shell says it).
EXIT_TERMINATED = 143


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: the same clean-up runs on the way out."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises :class:`_Terminated` instead
    of ending the process at once, which would leave a partial output file, an operation
    running on the server and worker processes behind."""
    import threading

    def stop(signum: int, frame: object) -> None:
        raise _Terminated

    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: ``bulkwire sample`` warns before writing more than this into the current directory.
LARGE_SAMPLE_BYTES = 100 * 1000 * 1000

DESCRIPTION = ("Fast, exact, memory-bounded bulk loading of documents and embeddings into "
               "RavenDB (its bulk insert protocol). Give a command; 'bulkwire COMMAND -h' "
               "describes each.")


#: The option of each argument of the Python API that an option of the command line sets
#: (``compress`` is ``--gzip`` or ``--zstd``, by its value: :func:`_option`).
OPTIONS = {"url": "--url", "database": "--database", "certificate": "--certificate",
           "ca": "--ca", "out": "--out", "collection": "--collection",
           "id_column": "--id-column", "id_prefix": "--id-prefix",
           "vector_column": "--vector-column", "columns": "--columns",
           "batch_rows": "--batch-rows", "take": "--take", "float32": "--float32",
           "workers": "--workers", "threads": "--threads", "resume": "--resume",
           "rows": "--rows", "dim": "--dim", "seed": "--seed", "row_group_rows": "--row-group",
           "id_start": "--id-start", "consistency": "--consistency", "constants": "--set",
           "ttl": "--ttl", "timestamp": "--timestamp", "ttl_column": "--ttl-column",
           "timestamp_column": "--timestamp-column", "nulls": "--nulls",
           "max_errors": "--max-errors", "rejected": "--rejected", "dry_run": "--dry-run",
           "max_rows_per_second": "--max-rate", "max_bytes_per_second": "--max-bytes-rate",
           "report": "--report"}

#: An error of the Python API that begins by naming its argument: ``compress='zstd': ...``,
#: ``columns[2] is ...``, ``batch_rows must be ...``, ``take needs ...``, ``database is required ...``.
_ARGUMENT_FIRST = re.compile(r"^(?P<name>[a-z_0-9]+)(?:=(?P<value>'[^']*'|\"[^\"]*\"|[^\s:]+)"
                             r"|(?P<index>\[\d+\]))?(?=:| must | needs | is )")


def _option(name: str, value: str | None) -> str:
    """How the command line says ``name=value`` of the Python API (``value`` its repr, or
    None): ``--zstd`` for ``compress='zstd'``, ``--id-column x`` for ``id_column='x'``."""
    try:
        given = None if value is None else ast.literal_eval(value)
    except (ValueError, SyntaxError):
        given = value
    if name == "compress":  # --gzip and --zstd are the two encodings' own flags
        if given in ("gzip", "zstd"):
            return f"--{given}"
        return f"--compress {given}" if isinstance(given, str) else "--gzip"
    if value is None:
        return OPTIONS[name]
    return f"{OPTIONS[name]} {given}"


def in_cli_words(message: str) -> str:
    """``message`` (an error of the Python API) naming the command line's option where it
    names the Python argument that option sets; as it is otherwise.

    >>> in_cli_words("compress='zstd': bulkwire was built without libzstd")
    '--zstd: bulkwire was built without libzstd'
    >>> in_cli_words("batch_rows must be positive, got 0")
    '--batch-rows must be positive, got 0'
    """
    message = _arguments_inside(message)
    found = _ARGUMENT_FIRST.match(message)
    if found is None or (found["name"] not in OPTIONS and found["name"] != "compress"):
        return message
    option = _option(found["name"], found["value"])
    if found["index"]:  # columns[2]: the third name given to --columns
        option = f"{option} (name {int(found['index'][1:-1]) + 1})"
    return option + message[found.end():]


#: An argument named without a value inside a message: ``(leave it out with columns=)``.
_ARGUMENT_INSIDE = re.compile(r"(?<![\w.-])(?P<name>[a-z_0-9]+)=(?=$|[\s),.;])")


def _arguments_inside(message: str) -> str:
    """``message`` with each argument it names inside (``columns=``) as its option."""
    return _ARGUMENT_INSIDE.sub(
        lambda m: OPTIONS.get(m["name"], m[0]) if m["name"] != "compress" else m[0], message)


def _fail(message: str, code: int = EXIT_INPUT, error: BaseException | None = None) -> int:
    """Prints ``message`` (and the notes of ``error``: which worker, which rows were not
    confirmed) on stderr, naming the command line's options where the Python API's errors
    name its arguments (:func:`in_cli_words`); returns ``code``."""
    message = in_cli_words(message)
    print(f"bulkwire: error: {message}", file=sys.stderr)
    for note in getattr(error, "__notes__", None) or ():
        print(f"  {note}", file=sys.stderr)
    return code


def _positive_int(text: str) -> int:
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


#: The units a size may end with (``50MB``, ``1GiB``, ``512k``): powers of 1000 without an
#: ``i``, of 1024 with one; ``K``/``M``/``G``/``T`` alone are powers of 1000.
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
               "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12,
               "tb": 10**12, "tib": 2**40}
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """A size in bytes from text: ``1048576``, ``50MB`` (10**6), ``1GiB`` (2**30), ``1.5M``.

    >>> parse_size("50MB"), parse_size("1GiB"), parse_size("512")
    (50000000, 1073741824, 512)
    """
    found = _SIZE.match(text)
    unit = found["unit"].lower() if found is not None else None
    if found is None or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (a number of bytes, or one with "
                                         f"a unit: 50MB, 1GiB)")
    return int(float(found["number"]) * _SIZE_UNITS[unit])


def _rate(text: str) -> float:
    """A rate of rows per second (``--max-rate``): a number (the load judges its range)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return int(value) if value.is_integer() else value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _port(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0-65535): {value}")
    return value


def _urls(text: str) -> list:
    """One --url value: a URL, or several separated by commas (a cluster's nodes), each
    judged by :func:`bulkwire.urls.parse_server_url` (argparse reports a refusal as usage)."""
    from .urls import parse_server_url

    try:
        if "@" in text:  # judged whole: a password may hold a comma, or an '@' and a comma
            parse_server_url(text, "URL")
        urls = [url.strip() for url in text.split(",")]
        if not all(urls):
            raise ValueError(f"empty URL in {text!r} (give one URL per --url, or the URLs "
                             f"separated by single commas)")
        for url in urls:
            parse_server_url(url, "URL")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return urls


def _cql_hosts(text: str) -> list:
    """One --cql value: HOST[:PORT], or several separated by commas, each judged by
    :func:`bulkwire.load.cql_target.parse_host`."""
    from .load.cql_target import parse_host

    hosts = [host.strip() for host in text.split(",")]
    try:
        for host in hosts:
            parse_host(host)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return hosts


def _column_map(text: str) -> list:
    """One --map value: SOURCE=TARGET, or several separated by commas; the pairs.

    >>> _column_map("emb=vector,id=pk")
    [('emb', 'vector'), ('id', 'pk')]
    """
    pairs = []
    for entry in text.split(","):
        source, equals, target = (part.strip() for part in entry.partition("="))
        if not (equals and source and target):
            raise argparse.ArgumentTypeError(f"{entry!r} is not SOURCE=TARGET (a column of the "
                                             f"data = its name in the target)")
        pairs.append((source, target))
    return pairs


def _constant(text: str) -> tuple:
    """One --set value: NAME=VALUE (the value as text, taken whole: it may hold commas and
    equals signs).

    >>> _constant("source=export-2026-12")
    ('source', 'export-2026-12')
    """
    name, equals, value = text.partition("=")
    if not (equals and name.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (a constant column)")
    return name.strip(), value


def _cql_address_map(text: str) -> list:
    """One --cql-address-map value: FROM=TO, or several separated by commas, each judged by
    :func:`bulkwire.load.cql_target.address_map_of`; the (FROM, TO) pairs.

    >>> _cql_address_map("172.17.0.3=127.0.0.1:19043,10.0.0.2:9042=tunnel")
    [('172.17.0.3', '127.0.0.1:19043'), ('10.0.0.2:9042', 'tunnel')]
    """
    from .load.cql_target import address_map_of

    pairs = []
    for entry in (one.strip() for one in text.split(",")):
        source, equals, target = entry.partition("=")
        if not (equals and source.strip() and target.strip()):
            raise argparse.ArgumentTypeError(f"{entry!r} is not FROM=TO (an address the "
                                             f"cluster advertises = HOST[:PORT])")
        try:
            address_map_of([(source, target)], what=f"entry {entry!r}")
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        pairs.append((source, target))
    return pairs


def _parse_take(text: str | None) -> list | None:
    """``--take 1,5,7`` or ``--take @file`` (whitespace/comma separated indices)."""
    if text is None:
        return None
    if text.startswith("@"):
        try:
            with open(text[1:]) as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--take {text}: cannot read {text[1:]!r}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
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
    estimate = args.rows * (args.dim * 4 + 8)  # random float32 values hardly compress
    folder = os.path.dirname(os.path.abspath(args.path))
    if estimate > LARGE_SAMPLE_BYTES and folder == os.path.abspath(os.getcwd()):
        print(f"bulkwire: warning: writing about {estimate / 1e6:,.0f} MB into the current "
              f"directory ({args.path})", file=sys.stderr)
    try:
        from .parquet import sample_parquet

        start = time.perf_counter()
        with _sigterm_stops():
            path = sample_parquet(args.path, rows=args.rows, dim=args.dim, seed=args.seed,
                                  row_group_rows=args.row_group, id_start=args.id_start)
    except _Terminated:
        return _fail("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        return _fail(str(exc))
    print(f"wrote {args.rows:,} rows x {args.dim} float32 dims (seed {args.seed}) to {path}: "
          f"{os.path.getsize(path):,} bytes in {time.perf_counter() - start:.2f} s")
    return EXIT_OK


def _no_vector_column_notice(args: argparse.Namespace) -> str | None:
    """The line to print when the file has no column that can be the vector (the load goes
    on with the other columns), or None. It is printed once the load succeeded: a load that
    fails (on a column's type, say) reports that alone."""
    if args.vector_column is not None:
        return None
    from .load.datasets import _dataset_files, _schema
    from .load.plan import _plan

    try:
        first = _dataset_files(_source(args))[0]
        plan = _plan(_schema(first), first, args.id_column, None,
                     None if args.columns is None else args.columns.split(","))
    except Exception:  # the load itself reports what is wrong with the file
        return None
    if plan.vector_column is not None:
        return None
    return (f"bulkwire: no vector column found in {first} (a list of float32/float64): "
            f"loaded the other columns")


def _source(args: argparse.Namespace) -> str | list:
    """One PATH as it is (a file, a directory, a glob), several as a list."""
    return args.path[0] if len(args.path) == 1 else list(args.path)


#: ``bulkwire load``'s options that are :class:`bulkwire.LoadOptions` fields (the argparse
#: dest of each is the field's name)
LOAD_OPTION_ARGUMENTS = ("collection", "id_column", "id_prefix", "vector_column", "compress",
                         "float32", "batch_rows", "max_errors", "rejected", "dry_run",
                         "max_rows_per_second", "max_bytes_per_second", "report")


def _load_options(args: argparse.Namespace, columns: list | None):
    """The load's :class:`bulkwire.LoadOptions` from the arguments (``--map`` pairs join
    ``--columns``, whose columns keep their names; ``--set`` gives the constants); a value
    it refuses is a usage error (exit 2) with its message."""
    from .load_options import LoadOptions

    mapped = [pair for value in getattr(args, "map", None) or () for pair in value]
    if mapped:
        kept = [(name, name) for name in columns or () if name not in dict(mapped)]
        columns = kept + mapped  # type: ignore[assignment]
    constants = getattr(args, "set", None) or None
    try:
        return LoadOptions(columns=tuple(columns) if mapped else columns,
                           constants=constants,
                           **{name: getattr(args, name) for name in LOAD_OPTION_ARGUMENTS})
    except (TypeError, ValueError) as exc:
        args.parser.error(in_cli_words(str(exc)).replace(" needs rejected", " needs --rejected")
                          .replace(" needs max_errors", " needs --max-errors"))


#: The options of the target kinds (bulkwire.targets) that ``bulkwire load`` gives under
#: another name (the kind's option -> the argument's dest), and those it cannot give (not
#: text). Every other option of a kind that no argument of ``bulkwire load`` has is an
#: argument of its own, ``--<option>``, generated from the registry (:func:`_target_arguments`).
TARGET_ALIASES = {"hosts": "cql", "url": "url", "tls": "cql_tls",
                  "address_map": "cql_address_map", "path": "out"}
TARGET_NOT_TEXT = {"ssl_context"}


def _target_arguments(load: argparse.ArgumentParser) -> None:
    """Adds ``--target KIND`` and, for every option of a kind of
    :data:`bulkwire.targets.KINDS` that no argument gives, ``--<option>`` (a string, read as
    the option's type when the target is made; its dest ``target_<option>``)."""
    from .targets import KINDS, REQUIRED, options

    load.add_argument("--target", choices=sorted(KINDS),
                      help="the kind of target (default: ravendb with --url, cql with --cql, "
                           "else request_file); jsonl writes one document per line to --out")
    taken = {action.dest for action in load._actions}
    found: dict = {}
    for kind in sorted(KINDS):
        for option in options(kind):
            if (option.name in taken or option.name in TARGET_ALIASES
                    or option.name in TARGET_NOT_TEXT):
                continue
            found.setdefault(option.name, []).append((kind, option.default))
    for name, kinds in sorted(found.items()):
        defaults = {repr(default) for _, default in kinds if default is not REQUIRED}
        shown = ", ".join(kind for kind, _ in kinds)
        said = f"; default {defaults.pop()}" if len(defaults) == 1 else ""
        load.add_argument("--" + name.replace("_", "-"), dest=f"target_{name}", metavar="VALUE",
                          help=f"the target's {name} (with --target {shown}{said})")


def _target_kind(args: argparse.Namespace) -> tuple:
    """The kind of the load's target (``--target``, else what ``--url`` / ``--cql`` say), and
    the generated options given for it (their values as text); a usage error when
    ``--target`` contradicts them, or an option given is not one of the kind's."""
    from .targets import _from_text, options

    kind = args.target or ("cql" if args.cql is not None else
                           "ravendb" if args.url is not None else "request_file")
    needs = {"ravendb": "--url", "cql": "--cql"}
    if args.target is not None:
        for flag, value in (("--url", args.url), ("--cql", args.cql)):
            if value is not None and needs.get(kind) != flag:
                args.parser.error(f"--target {kind} excludes {flag}")
        if kind in needs and getattr(args, needs[kind][2:]) is None:
            args.parser.error(f"--target {kind} needs {needs[kind]}")
        if kind == "jsonl" and args.out is None:
            args.parser.error("--target jsonl needs --out (the JSON Lines file)")
    taken = {option.name: option.annotation for option in options(kind)}
    given = {}
    for name, value in vars(args).items():
        if not name.startswith("target_") or value is None:
            continue
        option = name[len("target_"):]
        if option not in taken:
            args.parser.error(f"--{option.replace('_', '-')} is not an option of the {kind} "
                              f"target")
        try:
            given[option] = _from_text(option, value, taken[option])
        except ValueError as exc:
            args.parser.error(in_cli_words(str(exc)))
    return kind, given


def cmd_load(args: argparse.Namespace) -> int:
    """Load Parquet / Arrow IPC files with bulk insert (or write the request body to a file)."""
    from .errors import LoadError, ResumeStateError
    from .load.rejects import TooManyRejected

    if args.cql is not None:
        for name, value in (("--url", args.url), ("--out", args.out),
                            ("--database", args.database)):
            if value is not None:
                args.parser.error(f"--cql excludes {name} (a CQL table is the target)")
        if args.compress != args.parser.get_default("compress"):
            args.parser.error(f"--cql excludes {_option('compress', repr(args.compress))} "
                              f"(a RavenDB body's option; the CQL frames are not compressed)")
        for name in ("collection", "id_column", "id_prefix", "vector_column", "float32"):
            if getattr(args, name) != args.parser.get_default(name):
                args.parser.error(f"--cql excludes --{name.replace('_', '-')} (a RavenDB "
                                  f"document's option; a row's columns are the table's)")
    elif args.keyspace is not None or args.table is not None:
        args.parser.error("--keyspace and --table need --cql")
    elif args.cql_address_map is not None:
        args.parser.error("--cql-address-map needs --cql")
    address_map = None
    if args.cql_address_map is not None:
        from .load.cql_target import address_map_of

        try:
            address_map = dict(address_map_of(
                [pair for value in args.cql_address_map for pair in value],
                what="--cql-address-map"))
        except ValueError as exc:  # an address given twice
            args.parser.error(str(exc))
    if args.cql is not None and (args.keyspace is None or args.table is None):
        args.parser.error("--cql needs --keyspace and --table")
    if args.cql is not None and args.insecure and not (args.cql_tls or args.certificate):
        args.parser.error("--insecure needs --cql-tls with --cql: it turns off verifying the "
                          "nodes' certificates, and only --cql-tls (or --certificate) turns "
                          "TLS on")
    if args.cql is not None:
        from .load.cql_target import consistency_code

        try:
            consistency_code(args.consistency)
        except ValueError as exc:
            args.parser.error(in_cli_words(str(exc)))
    if (args.username is None) != (args.password is None):
        args.parser.error("--username and --password go together")
    if args.url is None and args.database is not None:
        args.parser.error("--database needs --url")
    if args.url is not None and args.database is None:
        args.parser.error("--url needs --database")
    columns = None if args.columns is None else args.columns.split(",")
    if columns is not None and not all(columns):
        args.parser.error(f"--columns {args.columns!r}: empty column name (give the names "
                          f"separated by single commas)")
    if args.ca is not None and args.insecure:
        args.parser.error("--ca and --insecure exclude each other")
    if args.key is not None and args.certificate is None:
        args.parser.error("--key needs --certificate")
    options = _load_options(args, columns)
    if options.report is not None:  # before any file is read or request sent
        from .load.report import check_writable

        try:
            check_writable(options.report)
        except ValueError as exc:
            args.parser.error(f"--{exc}")
    certificate = args.certificate if args.key is None else (args.certificate, args.key)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    url = None
    target = None
    kind, given = _target_kind(args)
    if args.url is not None:  # one URL: that server alone; several: a cluster's nodes
        urls = [one for value in args.url for one in value]
        url = urls[0] if len(urls) == 1 else urls
        ca = False if args.insecure else args.ca
        try:  # the server's options (URLs given twice, TLS files), before any file is read
            from .targets import make

            target = make("ravendb", url=url, database=args.database, certificate=certificate,
                          ca=ca, **options.document_options(), **given)
        except (OSError, ValueError, TypeError) as exc:  # a TLSFileError is a ValueError
            return _fail(str(exc), EXIT_USAGE)
    elif args.cql is None:
        from .targets import make

        try:
            target = (make(kind, path=args.out, **options.document_options(), **given)
                      if kind == "jsonl" else
                      make(kind, out=args.out, **options.document_options(), **given))
        except (ValueError, TypeError) as exc:
            args.parser.error(in_cli_words(str(exc)))
    try:
        from .load import load_parquet
        from .load.datasets import _dataset_files

        try:
            _dataset_files(_source(args))
        except ValueError as exc:  # PATH holds what cannot be data: a FIFO, a device, a loop
            return _fail(str(exc), EXIT_USAGE)
        take = _parse_take(args.take)
        notice = _no_vector_column_notice(args) if args.cql is None else None
        if (args.workers > 1 or args.resume is not None) and url is None and args.cql is None:
            args.parser.error(f"{'--workers' if args.workers > 1 else '--resume'} needs --url")
        with _sigterm_stops():
            if args.cql is not None:
                from .targets import make

                target = make(
                    "cql", hosts=[one for value in args.cql for one in value],
                    keyspace=args.keyspace, table=args.table,
                    consistency=args.consistency, username=args.username,
                    password=args.password, tls=args.cql_tls, certificate=certificate,
                    ca=False if args.insecure else args.ca, address_map=address_map, **given)
            result = load_parquet(
                _source(args), target, options=options.pipeline_only(), take=take,
                progress=progress and not args.quiet, workers=args.workers,
                threads=args.threads, resume=args.resume)
    except _Terminated as exc:
        return _fail("terminated", EXIT_TERMINATED, exc)
    except KeyboardInterrupt as exc:
        return _fail("interrupted", EXIT_INTERRUPTED, exc)
    except TooManyRejected as exc:  # the data's rows, as a refused row without --max-errors
        return _fail(str(exc), EXIT_INPUT, exc)
    except LoadError as exc:  # the target or the network (before OSError: not a file)
        return _fail(str(exc), EXIT_SERVER, exc)
    except ResumeStateError as exc:  # --resume STATE does not fit this load: a usage error
        return _fail(str(exc), EXIT_USAGE, exc)
    except ImportError as exc:
        return _fail(str(exc), error=exc)
    except FileNotFoundError as exc:
        return _fail(str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) and len(exc.args) == 1
                     else str(exc), error=exc)
    except (ValueError, TypeError, KeyError, IndexError, OSError) as exc:
        return _fail(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc),
                     error=exc)
    if notice is not None:
        print(notice, file=sys.stderr)
    print(result.summary())
    return EXIT_REJECTED if result.rejected_rows else EXIT_OK


def _request_line(request) -> str:
    """One line for a finished bulk insert request of the loopback server."""
    outcome = (f"answered {request.status}" if request.error is None
               else f"failed ({request.error})")
    documents = len(request.commands) if request.commands is not None else request.put_commands
    encoding = request.headers.get("Content-Encoding") or "plain"
    return (f"bulk insert {request.op_id}: {documents:,} documents, {request.body_bytes:,} "
            f"body bytes ({encoding}), {outcome}")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the loopback bulk insert server until Ctrl-C, one line per finished request."""
    from .testing import LoopbackServer

    try:
        server = LoopbackServer(args.database, port=args.port, keep_body=args.keep,
                                keep_decoded_chunks=False)
    except OSError as exc:
        return _fail(f"--port {args.port}: {exc.strerror or exc}", EXIT_USAGE)
    with server:
        print(f"serving database {args.database!r} at {server.url} "
              f"({'keeping documents' if args.keep else 'counting only'}); Ctrl-C stops",
              flush=True)
        reported = 0
        try:
            while True:
                time.sleep(0.2)
                finished = [r for r in server.requests[reported:]]
                for request in finished:
                    if request.status is None and request.error is None:
                        break  # still arriving: report in order
                    print(_request_line(request), flush=True)
                    reported += 1
        except KeyboardInterrupt:
            pass
    return EXIT_OK


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show: no default, a flag
    (whose ``default`` is the value of its destination when absent, not a value to give it:
    ``--count-only`` stores False into ``keep``, whose default True is not its own), or a help
    text that already says its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.default in (None, False) or action.default is argparse.SUPPRESS
                or action.nargs == 0 or "default" in text):
            return text
        return super()._get_help_string(action)


class _VersionAction(argparse.Action):
    """``--version``: bulkwire's version, then what the build has (:func:`bulkwire.show_config`)."""

    def __init__(self, option_strings: list, dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        _show_version()
        parser.exit()


def _show_version() -> None:
    """What ``--version`` prints: the version and what the build has."""
    from .config import show_config

    show_config()


def build_parser() -> argparse.ArgumentParser:
    from .compression import COMPRESS_NAMES
    from .load_options import FLOAT32_MODES, LoadOptions

    defaults = LoadOptions()  # the load options' defaults and choices are the class's
    parser = argparse.ArgumentParser(prog="bulkwire", description=DESCRIPTION,
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version, the optional C libraries this build has and "
                             "the backend of each feature, and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str, description: str, func) -> argparse.ArgumentParser:
        made = sub.add_parser(name, help=summary, description=description,
                              formatter_class=_HelpFormatter)
        made.set_defaults(func=func, parser=made)
        return made

    sample = command("sample", "write a seeded sample Parquet file of embeddings",
                     "Write PATH: an int64 'id' (from ID_START) and a "
                     "fixed_size_list<float32>[DIM] column "
                     "'emb' with values uniform in [0, 1), the same for the same seed.",
                     cmd_sample)
    sample.add_argument("path", metavar="PATH", help="the Parquet file to write")
    sample.add_argument("--rows", type=_non_negative_int, default=10_000, help="rows to write")
    sample.add_argument("--dim", type=_positive_int, default=1024, help="vector dimension")
    sample.add_argument("--seed", type=int, default=42, help="seed of the random values")
    sample.add_argument("--row-group", type=_positive_int, default=1024,
                        help="rows per Parquet row group")
    sample.add_argument("--id-start", type=_int, default=0,
                        help="the first id (the ids are ID_START .. ID_START + ROWS - 1): give "
                             "samples written side by side disjoint ids")

    load = command(
        "load", "load Parquet / Arrow IPC files with bulk insert",
        "Load PATH (Parquet or Arrow IPC files: a file, a directory, a glob, or several) with "
        "bulk insert: one document per row; every file's columns are checked before any is "
        "sent. Without --url, write the exact request body to --out (replayable later). Exit "
        "codes: 0 done, 1 bad input (file, column, row), 2 usage, 3 server or network error, "
        "130 interrupted, 143 terminated.",
        cmd_load)
    load.add_argument("path", metavar="PATH", nargs="+",
                      help="a Parquet or Arrow IPC file, a directory of them, or a glob "
                           "('data/*.parquet'); several PATHs load together")
    load.add_argument("--url", type=_urls, action="append",
                      help="server URL; repeat it, or separate URLs by commas, for the nodes of "
                           "a cluster; without it the request body goes to --out")
    load.add_argument("--database", help="database name (with --url)")
    load.add_argument("--cql", type=_cql_hosts, action="append", metavar="HOST[:PORT]",
                      help="load into a Cassandra/Scylla table instead (contact points, port "
                           "9042 by default; repeat or separate with commas)")
    load.add_argument("--keyspace", help="the table's keyspace (with --cql)")
    load.add_argument("--table", help="the table (with --cql)")
    load.add_argument("--consistency", default="LOCAL_ONE",
                      help="write consistency level (with --cql; default LOCAL_ONE)")
    load.add_argument("--username", help="PasswordAuthenticator user (with --cql)")
    load.add_argument("--password", help="PasswordAuthenticator password (with --cql)")
    load.add_argument("--cql-address-map", type=_cql_address_map, action="append",
                      metavar="FROM=TO[,FROM=TO...]",
                      help="with --cql: reach the node the cluster advertises at FROM (ADDRESS "
                           "for any port, or ADDRESS:PORT) at TO (HOST[:PORT]; without a port, "
                           "the node's own) instead, as through a port mapping, a NAT or a "
                           "tunnel; repeat or separate with commas. The node answering at a "
                           "contact point is always reached there")
    load.add_argument("--cql-tls", action="store_true",
                      help="TLS to the CQL nodes (--certificate, --key, --ca as for --url)")
    load.add_argument("--certificate", metavar="PEM",
                      help="client certificate for an https:// --url: a PEM file holding the "
                           "certificate and its private key (or the certificate alone, with --key)")
    load.add_argument("--key", metavar="PEM", help="the client certificate's private key, when "
                                                   "not in the --certificate file")
    load.add_argument("--ca", metavar="PEM", help="PEM bundle of the CAs that sign the server's "
                                                  "certificate (default: the system's)")
    load.add_argument("--insecure", action="store_true",
                      help="do not verify the server's certificate (encrypted, not authenticated)")
    load.add_argument("--out", help="output file (default: <name>.bulk.json, or .bulk.json.gz "
                                    "with --gzip, .bulk.json.zst with --zstd, next to PATH)")
    load.add_argument("--collection", default=defaults.collection,
                      help="the documents' @collection")
    load.add_argument("--id-column", default=defaults.id_column,
                      help="the column holding each document's id")
    load.add_argument("--id-prefix", default=defaults.id_prefix, help="prefix of every id (default: <collection in lower "
                                          "case>/ for integer ids, none for strings)")
    load.add_argument("--vector-column", default=defaults.vector_column, help="the vector column (default: the only list column)")
    load.add_argument("--columns", help="comma-separated document fields (default: all but the id)")
    load.add_argument("--map", type=_column_map, action="append", metavar="SOURCE=TARGET",
                      help="load column SOURCE as the target's TARGET (a CQL column, a "
                           "document field): emb=vector,id=pk; repeatable. Like --columns, "
                           "it chooses the columns loaded: the mapped ones and those "
                           "--columns names")
    load.add_argument("--set", type=_constant, action="append", metavar="NAME=VALUE",
                      help="a column NAME holding VALUE in every row (for a CQL table, "
                           "converted once to the column's type); repeatable")
    load.add_argument("--write-nulls", dest="target_nulls", action="store_const", const="null",
                      help="write a null in a CQL column as a null (a tombstone), not unset "
                           "(with --cql; the same as --nulls null)")
    encoding = load.add_mutually_exclusive_group()
    encoding.add_argument("--compress", choices=COMPRESS_NAMES, default=defaults.compress,
                          help="compress the body: an encoding (gzip, zstd) or a backend, as "
                               "load_parquet's compress= takes it")
    encoding.add_argument("--gzip", dest="compress", action="store_const", const="gzip",
                          help="gzip the body (fastest level): --compress gzip")
    encoding.add_argument("--zstd", dest="compress", action="store_const", const="zstd",
                          help="zstd the body (Content-Encoding: zstd; a fast level): "
                               "--compress zstd")
    load.add_argument("--batch-rows", type=_positive_int, default=defaults.batch_rows,
                      help="rows per Arrow batch (default: about 4 MiB of text)")
    load.add_argument("--take", help="only these row indices, in this order: 1,5,9 or @FILE "
                                     "(indices separated by commas or whitespace)")
    load.add_argument("--float32", choices=FLOAT32_MODES, default=defaults.float32,
                      help="float32 text: widen writes the double's repr (as json.dumps of the "
                           "float), shortest the shortest text that reads back as the float32")
    load.add_argument("--workers", type=_positive_int, default=1,
                      help="processes, each sending a disjoint share of the row groups in its "
                           "own bulk insert request (with --url)")
    load.add_argument("--threads", type=_positive_int,
                      help="threads validating batches and writing their text ahead of the "
                           "writer in each process (default: 2; 1: none ahead)")
    load.add_argument("--resume", metavar="STATE",
                      help="record each unit of work the server confirmed in the JSON file "
                           "STATE; run again with the same STATE to send only the rest (with "
                           "--url)")
    load.add_argument("--max-errors", metavar="N|P%", default=defaults.max_errors,
                      help="set aside up to N refused rows (or P%% of the rows), writing them "
                           "to --rejected, and load the rest (exit code 4 when any was); "
                           "default: the first refused row fails the load")
    load.add_argument("--rejected", metavar="FILE", default=defaults.rejected,
                      help="the rejected file: the refused rows, with _source_file, _row and "
                           "_reason columns, in the source's format (with --max-errors)")
    load.add_argument("--dry-run", action="store_true", default=defaults.dry_run,
                      help="read and check every row against the target, set the refused "
                           "ones aside (to --rejected, if given); send and write nothing")
    load.add_argument("--max-rate", dest="max_rows_per_second", type=_rate, metavar="ROWS",
                      help="send at most ROWS rows per second, over every worker, thread and "
                           "node together (docs/operations.md)")
    load.add_argument("--max-bytes-rate", dest="max_bytes_per_second", type=parse_size,
                      metavar="SIZE", help="send at most SIZE bytes of requests per second "
                                           "(50MB, 1GiB), over the whole load")
    load.add_argument("--report", metavar="FILE.json",
                      help="write the run report (what was loaded and confirmed, the options, "
                           "the target without credentials, the build) to FILE.json, also when "
                           "the load fails")
    load.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                      help="draw a progress bar on stderr (default: when stderr is a terminal)")
    load.add_argument("-q", "--quiet", action="store_true",
                      help="no progress bar (the summary line and errors are still printed)")
    _target_arguments(load)

    serve = command(
        "serve", "run the loopback bulk insert server (for trying and testing)",
        "Run bulkwire's loopback server: it speaks RavenDB's bulk insert protocol on "
        "127.0.0.1, checks every request, and prints one line per finished request. "
        "GET /_loopback/last answers what the last request looked like (JSON). "
        "It counts documents and bytes only, unless --keep.", cmd_serve)
    serve.add_argument("--port", type=_port, default=8080, help="TCP port (0: any free port)")
    serve.add_argument("--database", default="db", help="the database name it serves")
    keep = serve.add_mutually_exclusive_group()
    keep.add_argument("--keep", action="store_true",
                      help="keep and parse every document (memory grows with the data)")
    keep.add_argument("--count-only", dest="keep", action="store_false",
                      help="count documents and bytes only (the default)")

    demo = command("demo", "time the JSON encoder on generated documents",
                   "Encode DOCS generated documents, each with a DIM-dimensional float32 "
                   "vector, and print documents/s and MB/s.", cmd_demo)
    demo.add_argument("--docs", type=_positive_int, default=10_000, help="documents to encode")
    demo.add_argument("--dim", type=_positive_int, default=1024, help="vector dimension")
    demo.add_argument("--seed", type=int, default=42, help="seed of the random vectors")
    demo.add_argument("--float32", choices=FLOAT32_MODES, default=defaults.float32,
                      help="float32 text (see 'bulkwire load -h')")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``bulkwire`` and ``python -m bulkwire``; returns the exit code (usage
    errors exit 2 through argparse).

    >>> main(["demo", "--docs", "10", "--dim", "4"])  # doctest: +ELLIPSIS
    encoded 10 documents ...
    0
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["--version"]:
        # what the parser's --version action does when it comes first (it ends the parse
        # there), without building the parser, whose defaults import the bulk insert writer
        _show_version()
        raise SystemExit(EXIT_OK)  # as the action's parser.exit()
    parser = build_parser()
    # a subcommand's parser hands the arguments it does not know up to this one, which would
    # report them with the top-level usage: the subcommand's own parser reports them
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("bulkwire: error: give a command: sample, load, serve or demo "
              "('bulkwire -h' says what each does)", file=sys.stderr)
        return EXIT_USAGE
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
