"""Start Cassandra 5.0 by hand: ``python -m tests.servers.cassandra [options] [-- COMMAND ...]``.

The nodes run in a private network namespace (loopback only), so only processes started from
here reach them: COMMAND (default: an interactive shell when there is a terminal, otherwise
waiting for Ctrl-C) runs inside that namespace with ``CASSANDRA_HOSTS`` (comma-separated
addresses) and ``CASSANDRA_PORT`` set. When it ends, or on Ctrl-C or SIGTERM, every node is
stopped. The exit status is COMMAND's (130 after Ctrl-C). ``--fetch-only`` assembles the jars and exits.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from . import NATIVE_PORT, ServerError, fetch_jars, running


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, start the nodes, run the command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tests.servers.cassandra",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1, help="nodes on 127.0.0.1.. (default 1)")
    parser.add_argument("--first", type=int, default=1,
                        help="last byte of the seed's address 127.0.0.N (default 1)")
    parser.add_argument("--heap", default=None, help="heap per node (default 1G)")
    parser.add_argument("--keep-files", action="store_true",
                        help="keep the nodes' data and logs (the folder is printed)")
    parser.add_argument("--fetch-only", action="store_true",
                        help="assemble the jars into the cache and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- COMMAND ...: run inside the namespace while the nodes run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    began = time.monotonic()
    try:
        jars = fetch_jars()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    files = list(jars.iterdir())
    print(f"jars: {jars} ({len(files)} files, {sum(f.stat().st_size for f in files) / 2**20:.0f} "
          f"MiB; {time.monotonic() - began:.1f} s)", flush=True)
    if args.fetch_only:
        return 0

    signal.signal(signal.SIGTERM, _terminate)
    try:
        with running(args.nodes, first=args.first, heap=args.heap,
                     keep_files=args.keep_files or None) as nodes:
            for node in nodes:
                print(f"node {node.address} (pid {node.process.pid}): Cassandra "
                      f"{node.release_version}, ready in {node.start_seconds:.1f} s, "
                      f"RSS {node.rss_bytes() / 2**20:.0f} MiB, files {node.folder}", flush=True)
            env = dict(os.environ, CASSANDRA_HOSTS=",".join(n.address for n in nodes),
                       CASSANDRA_PORT=str(NATIVE_PORT))
            if not command and sys.stdin.isatty():
                command = [os.environ.get("SHELL", "/bin/bash")]
            if command:
                return subprocess.run(command, env=env).returncode
            print("running; Ctrl-C stops", flush=True)
            while True:
                for node in nodes:
                    node.check_alive()
                time.sleep(1.0)
    except KeyboardInterrupt:  # the nodes are stopped by now
        return 128 + signal.SIGINT
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
