"""The command line run in this process, as the tests of its commands run it."""
from __future__ import annotations


def run(argv, capsys):
    """(exit code, stdout, stderr) of ``bulkwire.cli.main(argv)``, usage errors included."""
    from bulkwire import cli

    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
