"""What every Arrow reader of the package shares, whatever the target: pyarrow imported on
first use (:func:`_pyarrow`: the ``parquet`` extra named when it is missing) and the type of
a path argument (:data:`PathLike`)."""
from __future__ import annotations

import os
from typing import Union

from ._extras import missing_extra

PathLike = Union[str, "os.PathLike[str]"]


def _pyarrow():
    """The ``pyarrow`` module, with its Parquet and IPC readers imported; an ``ImportError``
    naming the extra to install when it is missing."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
        import pyarrow.ipc  # noqa: F401
    except ImportError as exc:
        raise missing_extra("Parquet support", "pyarrow", "parquet") from exc
    return pyarrow
