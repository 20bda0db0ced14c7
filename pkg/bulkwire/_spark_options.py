"""The Spark data source's options read on the driver: the target made from them, the
pipeline's options, each task's file for a file target, the DataFrame's schema judged by the
target; all of it a :class:`_Job`, pickled to every task.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, List, Optional

#: The options the data source reads itself (the load pipeline's), besides ``target``.
PIPELINE_OPTIONS = ("batch_rows", "columns", "vector_column", "max_rows_per_second",
                    "max_bytes_per_second", "max_errors", "rejected")
#: A load's options a write's tasks cannot share, refused with why.
_REFUSED_OPTIONS = {
    "dry_run": "dry_run is not an option of the bulkwire data source: its tasks run on many "
               "machines, each storing its own rows (load_parquet and bulkwire load take it)",
    "report": "report is a load's own (its processes share one report), not the data "
              "source's: each write task is a load of its own"}
#: Options Spark itself gives a streaming sink, which are the query's (lower case).
_SPARK_OPTIONS = ("checkpointlocation",)


# ---------------------------------------------------------------------------- the options

#: The options that name a file target's output (``request_file``'s ``out``, ``jsonl``'s
#: ``path``): Spark's ``save(path)`` gives the one its kind has.
_OUTPUT_OPTIONS = ("out", "path")
#: The suffix of a task's file in a folder, for a file kind whose output has no default name
#: of its own (a kind with one, ``request_file``, names it itself, from ``part-<partition>``).
_FOLDER_SUFFIXES = {"jsonl": ".jsonl"}


@dataclass(frozen=True)
class _Job:
    """What the driver judged from the options, pickled to every task: the target's
    description, the load's options, and where the driver's commit leaves its result (None:
    the log alone). For a file target also its kind, its options as given (each task makes
    its own description of its own file) with the option that names the file, and the path
    of each task's file with ``{partition}`` (and ``{batch}``, streaming) still in it."""

    target: Any
    options: Any  # a LoadOptions
    result_dir: Optional[str]
    kind: str = ""
    given: Optional[dict] = None
    output_option: Optional[str] = None
    out: Optional[str] = None

    def output_of(self, partition: int, batch_id: Optional[int]) -> Optional[str]:
        """The final name of a task's file (None: a server)."""
        if self.out is None:
            return None
        return (self.out.replace("{partition}", f"{partition:05d}")
                .replace("{batch}", f"{batch_id if batch_id is not None else 0:05d}"))

    def task_target(self, partition: int, batch_id: Optional[int]) -> tuple:
        """(the description a task writes into, the task's file or None)."""
        output = self.output_of(partition, batch_id)
        if output is None:
            return self.target, None
        from . import targets

        return targets.make(self.kind, **{**(self.given or {}), self.output_option: output}), \
            output


def _job(options: Any, schema: Any, overwrite: bool, streaming: bool,
         result_dir: Optional[str], judge: bool = True,
         parallelism: Optional[int] = None) -> _Job:
    """Judges the data source's ``options`` (strings) and the DataFrame's Spark ``schema`` on
    the driver: the target described by :func:`bulkwire.targets.make`, the pipeline's
    options by :class:`bulkwire.LoadOptions`, the schema by the target's plan and encoder
    (without ``judge``: not the schema, which reads the table, a CQL one through a
    connection). Raises naming the option, the mode or the column. ``parallelism``: the
    tasks that run at once (the session's ``defaultParallelism``, read by :func:`register`),
    among which a rate limit is divided."""
    from . import targets
    from .load_options import LoadOptions

    if overwrite:
        raise ValueError("the bulkwire data source takes mode('append') only, not mode "
                         "'overwrite' (a load adds rows to its target; it never empties it)")
    given = {str(k).lower(): v for k, v in dict(options).items()}
    kind = given.pop("target", None)
    if kind is None:
        raise ValueError(f"the bulkwire data source needs option 'target', one of: "
                         f"{', '.join(sorted(targets.KINDS))}")
    kind = str(kind).strip()
    kind_options = targets.options(kind)  # ValueError naming the kinds
    own = [o.name for o in kind_options]
    for name, why in _REFUSED_OPTIONS.items():
        if name in given:
            raise ValueError(why)
    pipeline = {name: given.pop(name) for name in PIPELINE_OPTIONS if name in given}
    for name in _SPARK_OPTIONS:  # the query's, not the target's
        given.pop(name, None)
    output_option = next((name for name in _OUTPUT_OPTIONS if name in own), None)
    if output_option != "path" and "path" in given:  # save(path)
        path = given.pop("path")
        if output_option is None:
            raise ValueError(f"save(path) names a file target's output; the {kind} target "
                             f"has none (its options: {', '.join(own)})")
        if output_option in given:
            raise ValueError(f"save(path) and option {output_option!r} both name the output: "
                             f"give one")
        given[output_option] = path
    unknown = [name for name in given if name not in own]
    if unknown:
        raise TypeError(f"{unknown[0]} is not an option of the bulkwire data source for the "
                        f"{kind} target (its options: {', '.join(own)}; the data source's "
                        f"own: target, {', '.join(PIPELINE_OPTIONS)})")
    load = LoadOptions(
        batch_rows=_int(pipeline["batch_rows"], "batch_rows") if "batch_rows" in pipeline
        else None,
        columns=(tuple(c.strip() for c in pipeline["columns"].split(","))
                 if pipeline.get("columns") else None),
        vector_column=pipeline.get("vector_column") or None,
        max_rows_per_second=_number(pipeline.get("max_rows_per_second"), "max_rows_per_second"),
        max_bytes_per_second=_number(pipeline.get("max_bytes_per_second"),
                                     "max_bytes_per_second"),
        max_errors=_max_errors(pipeline.get("max_errors")),
        rejected=pipeline.get("rejected") or None)
    if load.max_rows_per_second or load.max_bytes_per_second:
        if parallelism is None:
            raise ValueError("a rate limit of the bulkwire data source is the whole write's, "
                             "divided among the tasks that run at once: register it with "
                             "bulkwire.spark.register(spark), which reads the session's "
                             "defaultParallelism")
        from ._arrow_sink import rate_share

        load = rate_share(load, parallelism)
    if load.rejected is not None:
        if os.path.exists(load.rejected) and not os.path.isdir(load.rejected):
            raise ValueError(f"rejected must be a directory (each task writes its own "
                             f"part-<partition>.parquet there), not the file {load.rejected!r}")
        os.makedirs(load.rejected, exist_ok=True)  # here, so that one that cannot be fails now
    if output_option is None:  # a server: one description for every task
        target = targets.make(kind, **given)
        if not target.units:
            raise ValueError(f"the {kind} target writes one output whole, which the tasks of "
                             f"a Spark job cannot share")
        if judge:
            _judge(target, schema, load)
        return _Job(target=target, options=load, result_dir=result_dir)
    # a file: one per task, each task's described by the kind from its own path
    default = next(o.default for o in kind_options if o.name == output_option)
    out = _per_task_out(kind, given, output_option, default, streaming)
    job = _Job(target=None, options=load, result_dir=result_dir, kind=kind,
               given={k: v for k, v in given.items() if k != output_option},
               output_option=output_option, out=out)
    target, _ = job.task_target(0, 0)
    if judge:
        _judge(target, schema, load)
    return dataclasses.replace(job, target=target)


def _number(text: Optional[str], name: str) -> Optional[float]:
    if text is None or str(text).strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text!r}") from None


def _max_errors(text: Optional[str]) -> Any:
    """``max_errors`` as given: a count, or a percentage (``"0.1%"``), judged by LoadOptions."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text).strip()
    return text if text.endswith("%") else _int(text, "max_errors")


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an int, not {text!r}") from None


def _per_task_out(kind: str, given: dict, output_option: str, default: Any,
                  streaming: bool) -> str:
    """The path of each task's file of the file kind ``kind`` (its options ``given``, the
    option ``output_option`` naming its output), with ``{partition}`` (and, streaming,
    ``{batch}``) in it: the path given, or, for a folder, a file ``part-<partition>`` in it
    named as the kind names its output."""
    from . import targets

    out = given.get(output_option)
    if not out:
        raise ValueError(f"the {kind} target writes one file per Spark task: give "
                         f"{output_option} (or save(path)) a folder, or a path holding "
                         f"{{partition}}")
    if "{partition}" in out:
        if streaming and "{batch}" not in out:
            raise ValueError(f"a streaming query writes one file per micro-batch and task: "
                             f"{output_option} needs {{batch}} as well as {{partition}}, not "
                             f"{out!r}")
        return out
    if not (out.endswith(("/", os.sep)) or os.path.isdir(out)):
        raise ValueError(f"the {kind} target writes one file per Spark task: {output_option} "
                         f"must be a folder or hold {{partition}}, not {out!r} (one file "
                         f"would be written by every task)")
    stem = os.path.join(out, "part-{batch}-{partition}" if streaming else "part-{partition}")
    rest = {k: v for k, v in given.items() if k != output_option}
    if default is None:  # the kind names its output after its source
        source = stem + ".parquet"
        name = targets.make(kind, **rest).placed(source, [source]).out
    elif kind in _FOLDER_SUFFIXES:  # the name whose suffix says the compression given
        name = _first_taken(kind, rest, output_option, [
            stem + _FOLDER_SUFFIXES[kind] + suffix for suffix in ("", ".gz", ".zst")])
    else:
        raise ValueError(f"the {kind} target writes one file per Spark task: {output_option} "
                         f"must hold {{partition}}, not {out!r}")
    os.makedirs(out, exist_ok=True)  # here, so that a folder that cannot be fails now
    return name


def _first_taken(kind: str, given: dict, output_option: str, names: List[str]) -> str:
    """The first of ``names`` the kind's constructor takes as its output with the options
    ``given`` (the last one's error when none is)."""
    from . import targets

    for name in names[:-1]:
        try:
            targets.make(kind, **given, **{output_option: name})
            return name
        except (TypeError, ValueError):
            continue
    targets.make(kind, **given, **{output_option: names[-1]})
    return names[-1]


def _judge(target: Any, spark_schema: Any, options: Any) -> None:
    """The target's plan and encoder on the DataFrame's Arrow schema, and the encoder on a
    batch without rows: every column the target cannot take is refused here, on the driver."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_schema, timezone="UTC")
    source = "the Spark DataFrame"
    plan = target.plan(schema, source, options)
    encode = target.encoder(schema, plan, options)
    empty = pa.RecordBatch.from_arrays(
        [pa.array([], type=schema.field(name).type) for name in plan.read_columns],
        names=list(plan.read_columns))
    encode(empty)
