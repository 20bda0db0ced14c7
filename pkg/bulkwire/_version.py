"""The version of bulkwire, written once (the package, its build and its reports read it)."""

__version__ = "0.1.0"
