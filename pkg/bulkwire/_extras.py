"""The error for an optional dependency that is not installed: it names the package, and the
install command that works from a checkout as well as from a package index."""
from __future__ import annotations


def missing_extra(feature: str, package: str, extra: str) -> ImportError:
    """The ImportError to raise (``from`` the original) when ``package`` is missing.

    >>> print(missing_extra("Parquet support", "pyarrow", "parquet"))
    bulkwire's Parquet support needs pyarrow, which is not installed: pip install pyarrow (or, from a bulkwire checkout, pip install '.[parquet]'; from a package index, pip install 'bulkwire[parquet]')
    """
    return ImportError(f"bulkwire's {feature} needs {package}, which is not installed: "
                       f"pip install {package} (or, from a bulkwire checkout, pip install "
                       f"'.[{extra}]'; from a package index, pip install 'bulkwire[{extra}]')")
