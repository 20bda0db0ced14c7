"""A Spark job run in a process of its own so that tests/test_spark_killed.py can kill it:
``python spark_killed_job.py FOLDER`` starts a ``local[6,2]`` session (a failed task is run
once more; 3 jobs of 2 tasks can write at once) whose Arrow batches hold 5 rows and whose
Python workers' streams are buffered by 512 bytes (so that batches reach a writer as they
are made, not once 64 KiB have gathered), prints
``{"jvm": <the JVM's process id>}``, then runs one write per line of stdin (a JSON object:
``name``, ``rows``, ``options``, ``gate``), each in a thread of its own, and prints
``{"name": ..., "returned": <last_result>}`` when its ``save()`` returned, or ``{"name":
..., "failed": <error>}`` when it raised. At the end of stdin it waits for the writes and
exits, with status 3 when one of them failed.

The DataFrame: ids ``0..rows-1`` with ``v`` = ``"v<id>"``, in 2 partitions of consecutive
ids. With ``gate``, partition 1 hands its first 4 batches to the writer, leaves the file
``gated-<name>`` in FOLDER and waits (up to 120 s) for the file ``release`` there.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bulkwire.spark  # noqa: E402

from _spark_session import spark_session  # noqa: E402


def gated(folder: str, name: str):
    """A mapInArrow function: partition 1 waits after its 4th batch (see the module)."""
    def gate(batches):
        import time

        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        for n, batch in enumerate(batches):
            yield batch
            if partition == 1 and n == 3:
                open(os.path.join(folder, f"gated-{name}"), "w").close()
                deadline = time.monotonic() + 120
                while (not os.path.exists(os.path.join(folder, "release"))
                       and time.monotonic() < deadline):
                    time.sleep(0.05)
    return gate


def main() -> None:
    folder = sys.argv[1]
    spark = spark_session(folder, master="local[6,2]",
                          conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "5",
                                "spark.buffer.size": "512"})
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    print(json.dumps({"jvm": int(jvm)}), flush=True)
    failed: list = []
    lock = threading.Lock()

    def say(**what) -> None:
        with lock:
            print(json.dumps(what), flush=True)

    def write(job: dict) -> None:
        # a thread of its own: Spark finds a Python data source through the JVM's active
        # session, which is the creating thread's until this thread sets it
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        df = spark.range(0, job["rows"], 1, numPartitions=2).selectExpr(
            "id", "concat('v', cast(id as string)) as v")
        if job.get("gate"):
            df = df.mapInArrow(gated(folder, job["name"]), df.schema)
        writer = df.write.format("bulkwire").mode("append")
        for name, value in job["options"].items():
            writer = writer.option(name, value)
        try:
            writer.save()
        except BaseException as exc:  # noqa: BLE001 - reported to the test, which judges it
            failed.append(job["name"])
            say(name=job["name"], failed=f"{type(exc).__name__}: {exc}"[:4000])
            return
        result = bulkwire.spark.last_result(spark)
        say(name=job["name"], returned=dataclasses.asdict(result) if result else None)

    threads = []
    for line in sys.stdin:
        threads.append(threading.Thread(target=write, args=(json.loads(line),)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    if failed:
        sys.exit(3)
    spark.stop()


if __name__ == "__main__":
    main()
