"""Arrow arrays made over NumPy memory without a copy, and without ``pyarrow.array``:
converting a NumPy array there imports pandas when it is installed (0.3 s and 45 MB in a
process that never uses it)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


def numeric_array(pa: Any, arrow_type: Any, values: np.ndarray,
                  nulls: Optional[np.ndarray] = None) -> Any:
    """An Arrow array of ``arrow_type`` over ``values`` (contiguous, of the matching NumPy
    dtype), sharing its memory; ``nulls`` (bools, one per value) marks null slots.

    >>> import numpy, pyarrow
    >>> nulls = numpy.array([False, True, False])
    >>> numeric_array(pyarrow, pyarrow.int64(), numpy.arange(3), nulls).to_pylist()
    [0, None, 2]
    """
    validity, null_count = None, 0
    if nulls is not None and nulls.any():
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
        null_count = int(nulls.sum())
    return pa.Array.from_buffers(arrow_type, values.size, [validity, pa.py_buffer(values)],
                                 null_count=null_count)
