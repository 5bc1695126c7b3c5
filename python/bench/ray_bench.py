"""Ray Data over Basalt against Ray Data over Parquet, on a local cluster.

One invocation starts ``ray.init(num_cpus=--workers)`` and measures, with
the same ``--rows`` rows (int64 key in shuffled order, two float64 and one
int64 column), each phase ``--runs`` times with the two formats
alternating, and prints the medians:

- ``write``: ``write_basalt(..., shards=--shards)`` (its pass sampling
  split points, then ``BasaltDatasink``) into a new store against ``Dataset.write_parquet`` into a new directory
  (the dataset materialized in Ray's object store first, in ``--blocks``
  blocks, so neither pays for generating it);
- ``read``: ``read_basalt`` against ``ray.data.read_parquet`` of what was
  written, every row materialized (``Dataset.materialize()``), rows/s;
- ``filtered``: the same two reads with ``.filter(expr=...)`` (a tenth of
  the keys) and ``.select_columns(["id", "a"])``, which Ray hands to each
  source as predicate and projection pushdown (rows/s over the whole
  dataset's rows).

Each write also reports its write amplification: the bytes every process
of the run (the driver and Ray's workers) passed to ``write`` calls
(``wchar`` in ``/proc/<pid>/io``) during the write, over the dataset's
Arrow bytes. Hard links write nothing; a row written into a staging file
and again into a shard counts twice.

Run it once per worker count to see the scaling::

    python bench/ray_bench.py --rows 10000000 --workers 1
    python bench/ray_bench.py --rows 10000000 --workers 2

``--checkpoint-gib`` instead builds a Basalt database of about that many
GiB and times ``Database.checkpoint`` and the disk space it adds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import basalt


def table(rows: int, seed: int = 7, sorted_ids: bool = False) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows) if sorted_ids else rng.permutation(rows)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "a": pa.array(rng.random(rows)),
            "b": pa.array(rng.random(rows)),
            "c": pa.array(rng.integers(0, 1 << 40, rows), pa.int64()),
        }
    )


def du_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def _session_pids() -> list[int]:
    """This process and every process of the local Ray cluster."""
    pids = [os.getpid()]
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ray" in cmdline and os.stat(f"/proc/{entry}").st_uid == os.getuid():
            pids.append(int(entry))
    return pids


def written_bytes() -> int:
    """Bytes the run's processes have passed to write calls so far."""
    total = 0
    for pid in _session_pids():
        try:
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("wchar:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def bench_ray(args: argparse.Namespace) -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from ray.data.expressions import col

    from basalt.ray_data import read_basalt, write_basalt

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    data = table(args.rows, sorted_ids=args.sorted)
    ds = ray.data.from_arrow(data).repartition(args.blocks).materialize()
    times: dict[str, list[float]] = {}
    amplification: dict[str, list[float]] = {}
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        for run in range(args.runs):
            order = ["basalt", "parquet"] if run % 2 == 0 else ["parquet", "basalt"]
            for fmt in order:
                target = work / f"{fmt}-{run}"
                written = written_bytes()
                start = time.perf_counter()
                if fmt == "basalt":
                    # With its pass sampling the split points.
                    write_basalt(ds, target, "data", ["id"], shards=args.shards)
                else:
                    ds.write_parquet(str(target))
                times.setdefault(f"write {fmt}", []).append(time.perf_counter() - start)
                amplification.setdefault(fmt, []).append((written_bytes() - written) / data.nbytes)
            def source(fmt: str, target: Path) -> "ray.data.Dataset":
                if fmt == "basalt":
                    return read_basalt(target, parallelism=args.read_tasks)
                return ray.data.read_parquet(str(target), override_num_blocks=args.read_tasks)

            for fmt in order:
                target = work / f"{fmt}-{run}"
                start = time.perf_counter()
                n = source(fmt, target).materialize().count()
                times.setdefault(f"read {fmt}", []).append(time.perf_counter() - start)
                assert n == args.rows, (fmt, n)
            # A tenth of the keys and two of the four columns, through Ray's
            # own calls (each source takes them as pushdown if it can).
            wanted = (col("id") >= args.rows // 2) & (col("id") < args.rows // 2 + args.rows // 10)
            for fmt in order:
                target = work / f"{fmt}-{run}"
                start = time.perf_counter()
                n = source(fmt, target).filter(expr=wanted).select_columns(["id", "a"]).materialize().count()
                times.setdefault(f"filtered {fmt}", []).append(time.perf_counter() - start)
                assert n == args.rows // 10, (fmt, n)
            for fmt in order:
                shutil.rmtree(work / f"{fmt}-{run}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        ray.shutdown()
    order = "in key order" if args.sorted else "shuffled"
    print(f"{args.rows} rows ({order}), {args.workers} worker(s), {args.shards} shards, {args.runs} runs (medians)")
    for phase in ["write", "read", "filtered"]:
        b = statistics.median(times[f"{phase} basalt"])
        p = statistics.median(times[f"{phase} parquet"])
        print(
            f"{phase:8}: basalt {args.rows / b / 1e6:6.2f}M rows/s ({b:.2f} s), "
            f"parquet {args.rows / p / 1e6:6.2f}M rows/s ({p:.2f} s): basalt/parquet {p / b:.2f}x"
        )
    print(
        "bytes written per Arrow byte during a write: "
        f"basalt {statistics.median(amplification['basalt']):.2f}, "
        f"parquet {statistics.median(amplification['parquet']):.2f}"
    )


def bench_checkpoint(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        src = work / "db"
        rows_per_batch = 1_000_000
        with basalt.open(src) as db:
            schema = table(1).schema.set(0, pa.field("id", pa.int64(), nullable=False))
            t = db.create_table("data", schema, primary_key=["id"])
            batch = 0
            while du_bytes(src) < args.checkpoint_gib * (1 << 30):
                chunk = table(rows_per_batch, seed=batch)
                chunk = chunk.set_column(0, "id", pa.array(np.arange(rows_per_batch) + batch * rows_per_batch))
                t.bulk_load(chunk.cast(schema))
                batch += 1
            db.flush()
            db.wait_for_background_work()
            size = du_bytes(src)
            before = du_bytes(work)
            times = []
            for i in range(args.runs):
                start = time.perf_counter()
                db.checkpoint(work / f"cp{i}")
                times.append(time.perf_counter() - start)
            added = du_bytes(work) - before
        print(
            f"checkpoint of a {size / (1 << 30):.2f} GiB database ({batch * rows_per_batch} rows): "
            f"median {statistics.median(times) * 1000:.1f} ms over {args.runs} "
            f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}); "
            f"{added / args.runs / 1024:.1f} KiB of disk added per checkpoint"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--read-tasks", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--sorted",
        action="store_true",
        help="ids in key order (each write task's rows a key range of their own) instead of shuffled",
    )
    p.add_argument("--dir", default=None, help="where data is written (default: the temp directory)")
    p.add_argument("--checkpoint-gib", type=float, default=0.0)
    args = p.parse_args()
    if args.checkpoint_gib > 0:
        bench_checkpoint(args)
    else:
        bench_ray(args)


if __name__ == "__main__":
    main()
