"""Deprecated: the loopback server's PKI is :mod:`bulkwire.testing.pki`; this module re-exports
it and warns once when imported."""
import warnings

from .testing.pki import make_pki, server_context

__all__ = ["make_pki", "server_context"]

warnings.warn("bulkwire.testing_pki is deprecated: import bulkwire.testing.pki",
              DeprecationWarning, stacklevel=2)
