"""The target interface: what the load pipeline (:mod:`bulkwire.load.entry`,
:mod:`bulkwire.load.pipeline`, :mod:`bulkwire.load.workers`) knows of where a load goes.

A load is described by a :class:`TargetDescription`: a small picklable value (a worker
process receives it) that judges the Arrow schema and makes the plan and the encoder of its
kind, opens sessions (:class:`TargetSession`: one request, or one session, each) into which
the pipeline stores encoded batches, and, when its sessions are confirmed each on its own
(a :class:`ResumableTarget`), says what a resume state binds to. The pipeline talks to
nothing else of a target. The kinds live in modules of their own
(:mod:`bulkwire.load.ravendb_target`, :mod:`bulkwire.load.cql_target`,
:mod:`bulkwire.load.jsonl_target`), and :mod:`bulkwire.targets` lists them by name.

Besides the protocols: :class:`DescriptionDefaults`, the methods a kind may take as they are,
and :func:`kind_constructor`, which makes a kind's constructor refuse, naming the kind, an
option it does not read.
"""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Protocol, TypeVar

from ..errors import LoadError
from ..load_options import LoadOptions

F = TypeVar("F", bound=Callable[..., Any])


class ColumnPlan(Protocol):
    """What the pipeline reads of a kind's plan: the columns to read from the source (in
    the order the encoder wants them), and the column whose vectors' dimension is given to
    the encoder (None: no vector column)."""

    @property
    def read_columns(self) -> list[str]: ...

    @property
    def vector_column(self) -> str | None: ...


class BatchEncoder(Protocol):
    """A kind's encoder: called (on encoding threads, in any order; the pipeline keeps the
    file order) with a record batch of the plan's columns, the vector dimension found in the
    first batch (-1: none or unknown) and the source row number of the batch's first row.
    It returns the batch made ready for the target (for the bulk insert kinds, validated:
    the writer encodes it in one call), which the pipeline hands, as it is, to
    :meth:`TargetSession.store`, and raises :class:`~bulkwire.errors.RowError` for a bad
    row (the batch's row number: the pipeline names the source's row). An encoder may also
    have ``ahead``, called as it is on encoding threads instead (the batch's text written
    there too, so that the writer only takes it over; the body is the same either way);
    what either returns may have ``discard()``, called when the batch will not be stored,
    to give its memory back at once. It is also the one
    judge of the columns' types: called on a batch without rows, it raises what it would
    raise on the first batch. Picklable (sent to worker processes)."""

    @property
    def plan(self) -> ColumnPlan: ...

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any: ...


class TargetSession(Protocol):
    """One request into a target (one session: a bulk insert request, one file written
    whole): the encoded batches of one or more units of work, stored in order. Either
    :meth:`close` returns (the target confirmed every row stored) or :meth:`abort` is
    called (the pipeline then raises): a session never ends normally with batches
    missing."""

    def store(self, encoded: Any, rows: int) -> int:
        """Stores one batch as the encoder gave it (``rows`` rows); returns the body bytes it
        adds. Raises (naming the target) when the target refuses or cannot be reached."""
        ...

    def close(self) -> None:
        """Ends the session; returns once the target confirmed it, else raises."""
        ...

    def abort(self) -> None:
        """Stops the session, so the target does not take it as complete (again: a no-op).
        Raises nothing: the load's own error is the one that matters."""
        ...

    @property
    def body_bytes(self) -> int:
        """The encoded bytes stored."""
        ...

    @property
    def wire_bytes(self) -> int:
        """The bytes that went out (compressed, where the kind compresses)."""
        ...


class TargetDescription(Protocol):
    """What a load goes into, as :func:`~bulkwire.load.load_parquet` (or another entry) built
    it from its arguments, with every argument judged: a picklable value, which a worker
    process receives in its job and opens its own sessions from.

    The pipeline calls, in this order: :meth:`plan` and :meth:`encoder` (the schema judged,
    before any row is read), :meth:`placed` once the sources are known, :meth:`describe`,
    with ``resume`` the members of :class:`ResumableTarget`, then :meth:`open` once per
    session: per unit of work when :meth:`request_per_unit` says so, else once for all the
    units of a process. A kind with :attr:`units` is a :class:`ResumableTarget`; one without
    is never resumed."""

    @property
    def units(self) -> bool:
        """Whether each session is confirmed by the target on its own (a database): the
        units of work can then go in sessions of their own (worker processes, ``resume``),
        and the rows of a failed load that no session confirmed are named. False for one
        output written whole or not at all (a file): one session, in this process."""
        ...

    def plan(self, schema: Any, source: str, options: LoadOptions) -> ColumnPlan:
        """Judges ``schema`` (the Arrow schema of ``source``, named in errors) with the load's
        ``options`` (its :class:`~bulkwire.LoadOptions`, every value already checked there:
        ``id_column``, ``columns``, ...): which columns are read, and how. Raises
        ``ValueError`` or ``TypeError`` naming the column."""
        ...

    def encoder(self, schema: Any, plan: Any, options: LoadOptions) -> BatchEncoder:
        """The encoder of ``plan``'s batches, with the load's ``options``. The pipeline calls
        it on a batch without rows before any row is read."""
        ...

    def placed(self, path: Any, files: list[str] | None) -> "TargetDescription":
        """This description for the sources of the load (``path`` as given, ``files`` its
        data files, or None for Arrow data): a target whose place follows from them (the
        file's default name) takes it now. Raises ``ValueError`` when it cannot."""
        ...

    def describe(self) -> str:
        """The target for messages and :attr:`~bulkwire.load.LoadResult.target`."""
        ...

    def request_per_unit(self, resume: bool) -> bool:
        """Whether each unit of work needs a session of its own (with ``resume``, a unit is
        recorded once its session is confirmed)."""
        ...

    def open(self) -> TargetSession:
        """A new session (in the process that calls it: a worker opens its own)."""
        ...


class ResumableTarget(TargetDescription, Protocol):
    """A target with :attr:`~TargetDescription.units`: a load into it can record its units
    in a resume state, and a later load resume from there. Called with ``resume``:
    :meth:`resume_options`, :meth:`resume_identity`, and :meth:`checked_identity` / :meth:`identity_mismatch` when
    the state file exists; then :meth:`resuming` when it records earlier work."""

    def resuming(self) -> "ResumableTarget":
        """This description for a load that resumes an earlier one, whose sessions may send
        rows again that the target already holds (RavenDB: they are skipped when unchanged)."""
        ...

    def resume_options(self, encode: Any, options: LoadOptions) -> dict:
        """The options a resume state records (JSON), from the encoder and the load's
        :class:`~bulkwire.LoadOptions`: a state written with other options is refused, since
        the rows it confirmed were written otherwise."""
        ...

    def resume_identity(self) -> dict:
        """What a resume state binds to (JSON; never a credential), in one spelling: two
        descriptions of the same target give equal identities."""
        ...

    def checked_identity(self, recorded: Any) -> dict:
        """A state file's recorded identity (any JSON), judged and spelled as
        :meth:`resume_identity` spells it; ``ValueError`` saying what is wrong with it."""
        ...

    def identity_mismatch(self, recorded: dict) -> str:
        """Why a state recorded for ``recorded`` is not this load's (the rest of the
        sentence "resume state <path> ...")."""
        ...


class DescriptionDefaults:
    """The methods of :class:`TargetDescription` that most kinds write the same way; a kind
    inherits them and writes the others: a target placed once made (:meth:`placed`), one
    session for all the units of a process (:meth:`request_per_unit`), compressed by nothing
    (:attr:`compress`), failing as any load (:attr:`load_error`)."""

    #: the compression of the output, for :attr:`~bulkwire.load.LoadResult.compress`
    compress: bool | str = False
    #: the class of a failure the pipeline itself finds (a worker process that died): a
    #: :class:`~bulkwire.errors.LoadError`, or the kind's own case of it
    load_error: type = LoadError

    def placed(self, path: Any, files: list[str] | None) -> Any:
        return self

    def request_per_unit(self, resume: bool) -> bool:
        return resume


def kind_constructor(kind: str) -> Callable[[F], F]:
    """Decorator of a kind's constructor (its options keyword parameters with defaults): a
    keyword it does not take is a ``TypeError`` naming the option and ``kind``, and listing
    the kind's options. :func:`inspect.signature` still reads the constructor's own.

    >>> @kind_constructor("example")
    ... def example(path: str, *, level: int = 1) -> tuple:
    ...     return path, level
    >>> example("p", level=2)
    ('p', 2)
    >>> example("p", compress="gzip")
    Traceback (most recent call last):
    ...
    TypeError: compress is not an option of the example target (its options: path, level)
    """
    def decorate(function: F) -> F:
        parameters = inspect.signature(function).parameters
        taken = [name for name, p in parameters.items()
                 if p.kind not in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD)]

        @functools.wraps(function)
        def construct(*args: Any, **options: Any) -> Any:
            for name in options:
                if name not in taken:
                    raise TypeError(f"{name} is not an option of the {kind} target (its "
                                    f"options: {', '.join(taken)})")
            return function(*args, **options)

        construct.kind = kind  # type: ignore[attr-defined]
        return construct  # type: ignore[return-value]
    return decorate


def _remove(path: str) -> None:
    """Removes a file this load made (a partial output, a temporary state), if it is there."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _cut(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a hand-edited state can hold anything,
    nested as deep as JSON goes: reprlib does not descend far)."""
    import reprlib

    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = limit
    return _cut(shortened.repr(value), limit)


