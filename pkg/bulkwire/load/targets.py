"""The target interface and the RavenDB kinds under their former module name: the protocols
are :mod:`bulkwire.load.interface`'s, the kinds :mod:`bulkwire.load.ravendb_target`'s, and
the public constructors :mod:`bulkwire.targets`'. Imported from here, they are the same
objects."""
from __future__ import annotations

from .._deprecated import renamed_module_attributes
from ..document_options import DEFAULT_BUFFER_SIZE
from ..load_options import RENAMED_CONSTANTS
from .interface import (BatchEncoder, ColumnPlan, DescriptionDefaults, ResumableTarget,
                        TargetDescription, TargetSession, _cut, _remove, _short)
from .ravendb_target import (FileDescription, ServerDescription, _default_out,
                             _describe_target, _DocumentDescription, _FileTarget,
                             _resume_target, _ServerTarget, default_out)

__all__ = ["BatchEncoder", "ColumnPlan", "DEFAULT_BUFFER_SIZE", "DescriptionDefaults",
           "FileDescription", "ResumableTarget", "ServerDescription", "TargetDescription",
           "TargetSession", "default_out", "_cut", "_default_out", "_describe_target",
           "_DocumentDescription", "_FileTarget", "_remove", "_resume_target", "_ServerTarget",
           "_short"]

__getattr__ = renamed_module_attributes(__name__, RENAMED_CONSTANTS)
