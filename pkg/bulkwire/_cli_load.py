"""``bulkwire load``: its arguments judged, its target made (``--url``, ``--cql``, ``--out``,
``--target`` and the target kinds' own options, generated from :mod:`bulkwire.targets`), the
load run and its outcome as an exit code.
"""
from __future__ import annotations

import argparse
import sys

from ._cli_errors import (EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED, EXIT_SERVER,
                          EXIT_TERMINATED, EXIT_USAGE, _fail, _option, _sigterm_stops,
                          _Terminated, in_cli_words)
from ._cli_values import _parse_take


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
