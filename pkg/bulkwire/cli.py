"""The ``bulkwire`` command line. Each subcommand is a function taking parsed arguments.

Exit codes: 0 done; 1 bad input (a file, a column, a row); 2 usage (a bad option or
value: a --url that :mod:`bulkwire.urls` refuses, a --certificate, --key or --ca file that
cannot be used); 3 the server or the network failed; 130 interrupted (Ctrl-C); 143 terminated
(SIGTERM). A command stopped by Ctrl-C or SIGTERM cleans up as after any failure: no partial
output stays, the bulk insert is aborted, worker processes are stopped."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

# the command line's rooms: its errors and exit codes, its option values, the load command,
# the other commands; their names kept here
from ._cli_errors import (EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED, EXIT_SERVER,
                          EXIT_TERMINATED, EXIT_USAGE, OPTIONS, in_cli_words)
from ._cli_load import (LOAD_OPTION_ARGUMENTS, TARGET_ALIASES, TARGET_NOT_TEXT,
                        _target_arguments, cmd_load)
from ._cli_sample_serve_demo import LARGE_SAMPLE_BYTES, cmd_demo, cmd_sample, cmd_serve
from ._cli_values import (_column_map, _constant, _cql_address_map, _cql_hosts, _int,
                          _non_negative_int, _port, _positive_int, _rate, _urls, parse_size)

__all__ = ["EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REJECTED", "EXIT_SERVER",
           "EXIT_TERMINATED", "EXIT_USAGE", "OPTIONS", "in_cli_words", "LOAD_OPTION_ARGUMENTS",
           "TARGET_ALIASES", "TARGET_NOT_TEXT", "cmd_load", "LARGE_SAMPLE_BYTES", "cmd_demo",
           "cmd_sample", "cmd_serve", "parse_size", "DESCRIPTION", "build_parser", "main"]

DESCRIPTION = ("Fast, exact, memory-bounded bulk loading of documents and embeddings into "
               "RavenDB (its bulk insert protocol). Give a command; 'bulkwire COMMAND -h' "
               "describes each.")



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
