"""``python -m bulkwire.testing``: the loopback server's command line, the same command as
``bulkwire serve`` (its options, their defaults and its output are defined once, in
:mod:`bulkwire.cli`)."""
import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
