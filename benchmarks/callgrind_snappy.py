"""Instruction counts of bulkwire's snappy decoder (csrc/core/compress/snappy.c) against
libsnappy's, on real data pages that pyarrow wrote with its default codec (snappy), under
callgrind (no wall clock: the counts are the same on a busy machine).

    python benchmarks/callgrind_snappy.py            # needs valgrind, cc, libsnappy-dev, pyarrow

The pages: a file of 20,000 rows with a sequential int64 id, a 768-dim float32 embedding
(normal noise: barely compressible), a float64 score, short repetitive text and a
dictionary-encoded category. Each data page body is decompressed by a small C program built
with setup.py's optimisation flags, once with each decoder, and only that call is counted
(``--toggle-collect``). Printed: per column, the bytes, and each decoder's instructions per
uncompressed byte.
"""
from __future__ import annotations

import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <snappy-c.h>
#include "snappy.h"

/* argv[1]: the pages file (records of u32 compressed size, u32 plain size, bytes);
   argv[2]: "bulkwire" or "libsnappy". Exit status 1 when a page does not decompress. */
__attribute__((noinline)) static int ours(const char *in, size_t n, char *out, size_t m) {
    const char *why;
    return bw_snappy_decompress((const uint8_t *)in, n, (uint8_t *)out, m, &why);
}
__attribute__((noinline)) static int theirs(const char *in, size_t n, char *out, size_t m) {
    size_t got = m;
    return snappy_uncompress(in, n, out, &got) == SNAPPY_OK && got == m ? 0 : -1;
}
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    int use_ours = strcmp(argv[2], "bulkwire") == 0;
    unsigned sizes[2];
    int rc = 0;
    while (!rc && fread(sizes, 4, 2, f) == 2) {
        char *in = malloc(sizes[0]), *out = malloc(sizes[1] ? sizes[1] : 1);
        if (fread(in, 1, sizes[0], f) != sizes[0]) rc = 1;
        else rc = use_ours ? ours(in, sizes[0], out, sizes[1]) : theirs(in, sizes[0], out, sizes[1]);
        free(in);
        free(out);
    }
    fclose(f);
    return rc ? 1 : 0;
}
"""


def pages(work: pathlib.Path) -> dict:
    """Writes the file and one pages file per column; {column: (path, plain bytes)}."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import parquet_craft as craft

    rng = np.random.default_rng(3)
    rows = 20000
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"])
    table = pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "embedding": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.standard_normal(rows * 768, dtype=np.float32)), 768),
        "score": pa.array(rng.random(rows)),
        "text": pa.array([" ".join(words[rng.integers(0, 6, 5)]) for _ in range(rows)]),
        "category": pa.array(words[rng.integers(0, 6, rows)]),
    })
    path = work / "pages.parquet"
    pq.write_table(table, path, compression="snappy", write_page_index=True,
                   use_dictionary=["category"])
    data = path.read_bytes()
    meta = pq.ParquetFile(path).metadata
    out = {}
    for leaf, name in enumerate(table.column_names):
        target = work / f"{name}.pages"
        plain = 0
        with open(target, "wb") as f:
            for group in range(meta.num_row_groups):
                for at in craft.data_pages(data, group, leaf):
                    page = craft.read_page(data, at)
                    size = page.header.get(craft.UNCOMPRESSED_SIZE)
                    f.write(struct.pack("<II", len(page.body), size) + page.body)
                    plain += size
        out[name] = (target, plain)
    return out


def count(exe: pathlib.Path, pages_file: pathlib.Path, decoder: str, work: pathlib.Path) -> int:
    """Instructions callgrind counts inside the decoder's call, over every page."""
    function = "ours" if decoder == "bulkwire" else "theirs"
    out = work / f"callgrind.{decoder}"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    f"--toggle-collect={function}", str(exe), str(pages_file), decoder],
                   check=True, capture_output=True)
    return int(re.search(r"^summary: (\d+)", out.read_text(), re.M).group(1))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        source = work / "harness.c"
        source.write_text(HARNESS)
        exe = work / "harness"
        subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O3", "-fno-strict-aliasing",
                        f"-I{ROOT / 'csrc' / 'core' / 'compress'}", str(source),
                        str(ROOT / "csrc" / "core" / "compress" / "snappy.c"), "-o", str(exe),
                        "-lsnappy"],
                       check=True)
        print(f"{'column':10} {'bytes':>11} {'bulkwire/byte':>14} {'libsnappy/byte':>15} {'ratio':>6}")
        totals = [0, 0, 0]
        for name, (pages_file, plain) in pages(work).items():
            ours = count(exe, pages_file, "bulkwire", work)
            theirs = count(exe, pages_file, "libsnappy", work)
            totals = [totals[0] + plain, totals[1] + ours, totals[2] + theirs]
            print(f"{name:10} {plain:11,} {ours / plain:14.3f} {theirs / plain:15.3f} "
                  f"{ours / theirs:6.2f}")
        plain, ours, theirs = totals
        print(f"{'all':10} {plain:11,} {ours / plain:14.3f} {theirs / plain:15.3f} "
              f"{ours / theirs:6.2f}")


if __name__ == "__main__":
    main()
