"""Sharded stores read and written by Ray Data on a local cluster
(``ray.init(num_cpus=2)``, no network): ``basalt.sharded``,
``basalt.ray_data.read_basalt`` and ``BasaltDatasink``."""

from __future__ import annotations

import multiprocessing
import os
import pathlib
from types import SimpleNamespace
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import basalt
from basalt import sharded

ray = pytest.importorskip("ray")
from basalt.ray_data import BasaltDatasink, BasaltDatasource, read_basalt, write_basalt  # noqa: E402

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module", autouse=True)
def local_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    try:
        yield
    finally:
        ray.shutdown()


def rows(n: int, seed: int = 1, offset: int = 0) -> pa.Table:
    ids = np.random.default_rng(seed).permutation(n) + offset
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([None if i % 10 == 0 else float(i) for i in ids.tolist()], pa.float64()),
            "s": pa.array([None if i % 7 == 0 else f"s{i}" for i in ids.tolist()], pa.utf8()),
        }
    )


def collect(ds: Any) -> pa.Table:
    return pa.concat_tables(ray.get(ds.to_arrow_refs()))


def test_a_million_rows_written_into_four_shards_read_back_equal(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    data = rows(1_000_000)
    ray.data.from_arrow(data).repartition(8).write_datasink(BasaltDatasink(store, "data", ["id"], shards=4))
    m = sharded.read_map(store)
    assert len(m.shards) == 4 and m.version == 1
    # Sampled split points: each shard within 8% of a quarter.
    sizes = []
    with sharded.ShardedDatabase(store, read_only=True) as s:
        for i in range(4):
            sizes.append(s.table(i).scan(columns=["id"]).read_all().num_rows)
    assert sum(sizes) == 1_000_000 and min(sizes) > 230_000, sizes
    back = collect(read_basalt(store, parallelism=8))
    want = data.sort_by("id")
    assert back.schema.field("id").type == pa.int64() and back.schema.field("s").type == pa.utf8()
    assert back.equals(want.cast(back.schema)), "order, types and nulls"
    assert back.column("v").null_count == 100_000


def test_projection_and_filter_are_applied_by_the_engine(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(100_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    got = collect(read_basalt(store, columns=["id", "s"], filter=[("id", "<", 1_000)]))
    assert got.column_names == ["id", "s"]
    assert got.column("id").to_pylist() == list(range(1_000))
    # The read tasks themselves return only those rows and columns.
    tasks = BasaltDatasource(store, columns=["id"], filter=[("id", ">=", 99_000)]).get_read_tasks(4)
    blocks = [b for task in tasks for b in task()]
    assert sum(b.num_rows for b in blocks) == 1_000 and all(b.column_names == ["id"] for b in blocks)
    # The engine's counters: the filter skips blocks by their zone maps.
    m = sharded.read_map(store)
    with basalt.open(store / m.shards[-1].path, read_only=True) as db:
        table = db.table("data")
        total = table.scan(columns=["id"]).read_all().num_rows
        before = db.stats()["table_rows_read"]
        table.scan(where=[("id", ">=", 99_000)]).read_all()
        assert db.stats()["table_rows_read"] - before < total // 4


def test_a_second_write_upserts_into_the_next_version(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(20_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=3))
    first = sharded.read_map(store)
    update = pa.table({"id": pa.array([5, 19_999, 30_000], pa.int64()), "v": [0.5, 1.5, 2.5], "s": ["a", "b", "c"]})
    ray.data.from_arrow(update).write_datasink(BasaltDatasink(store, "data"))
    second = sharded.read_map(store)
    assert second.version == 2 and second.split_points == first.split_points
    assert not any((store / s.path).exists() for s in first.shards), "the old version was removed"
    assert not any((store / ".staging").iterdir()), "staging removed"
    back = collect(read_basalt(store))
    assert back.num_rows == 20_001
    with sharded.ShardedDatabase(store, read_only=True) as s:
        assert s.get(5) == {"id": 5, "v": 0.5, "s": "a"}
        assert s.get(30_000) == {"id": 30_000, "v": 2.5, "s": "c"}


def fail_on_a_block(batch: pa.Table) -> pa.Table:
    if 500 in batch.column("id").to_pylist():
        raise RuntimeError("a write task fails")
    return batch


def test_a_failed_write_leaves_the_previous_version_readable(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(5_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    before = collect(read_basalt(store))
    m = sharded.read_map(store)
    bad = ray.data.from_arrow(rows(5_000, seed=2, offset=0)).repartition(4).map_batches(
        fail_on_a_block, batch_format="pyarrow"
    )
    context = ray.data.DataContext.get_current()
    retries, context.max_map_retries = context.max_map_retries, 0
    try:
        with pytest.raises(Exception):
            bad.write_datasink(BasaltDatasink(store, "data"))
    finally:
        context.max_map_retries = retries
    assert sharded.read_map(store) == m
    assert collect(read_basalt(store)).equals(before)
    assert not list((store / ".staging").iterdir()), "staging removed"
    assert shard_dirs(store) == sorted(s.path for s in m.shards)


def left_by(store: pathlib.Path, tag: str) -> list[str]:
    """What a write with ``tag`` left in the store: its staging directory
    and its shard directories."""
    return [p.name for p in [*store.iterdir(), *(store / ".staging").iterdir()] if tag in p.name]


def shard_dirs(store: pathlib.Path) -> list[str]:
    """The store's shard directories once no read pins an older version
    (reads pin the version they read for as long as their source lives)
    and a collection ran; check what a failed write left before this."""
    import gc

    gc.collect()
    basalt.ShardedStore(store).collect()
    return sorted(p.name for p in store.iterdir() if p.name.startswith("shard-"))


def test_a_failed_merge_or_a_commit_after_another_write_leaves_the_current_version(tmp_path: pathlib.Path) -> None:
    from types import SimpleNamespace

    store = tmp_path / "store"
    ray.data.from_arrow(rows(3_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    # An ingest fails (a written "file" that is not an SST): every ingest
    # ends, then the new directories go; the map and the old ones stay.
    m = sharded.read_map(store)
    before = collect(read_basalt(store))
    sink = BasaltDatasink(store, "data")
    sink.on_write_start()
    tag = sink._write.tag
    good = sink.write([rows(10, offset=50_000)], None)
    assert good["files"] and good["rows"] == 10
    not_an_sst = tmp_path / "not-an-sst.sst"
    not_an_sst.write_bytes(b"\0" * 100)
    bogus_file = {"path": str(not_an_sst), "rows": 1, "bytes": 100, "range": 0, "seqno": 1 << 40}
    bogus = {"task": 1, "files": [bogus_file], "rows": 1, "sample": [], "schema": good["schema"]}
    with pytest.raises(basalt.Error):
        sink.on_write_complete(SimpleNamespace(write_returns=[good, bogus]))
    assert left_by(store, tag) == [], "the failed write removed its own files"
    assert sharded.read_map(store) == m and shard_dirs(store) == sorted(s.path for s in m.shards)
    assert collect(read_basalt(store)).equals(before)
    assert not list((store / ".staging").iterdir())
    # A write that started before another one committed is refused at its
    # commit (ConflictError), and the other write's version stays whole.
    late = BasaltDatasink(store, "data")
    late.on_write_start()
    late_tag = late._write.tag
    staged = late.write([rows(10, offset=70_000)], None)
    ray.data.from_arrow(rows(100, offset=90_000)).write_datasink(BasaltDatasink(store, "data"))
    winner = sharded.read_map(store)
    with pytest.raises(basalt.ConflictError):
        late.on_write_complete(SimpleNamespace(write_returns=[staged]))
    assert left_by(store, late_tag) == []
    assert sharded.read_map(store) == winner and shard_dirs(store) == sorted(s.path for s in winner.shards)
    assert collect(read_basalt(store)).num_rows == 3_100


def test_rows_put_through_the_store_then_written_by_ray(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64()), pa.field("s", pa.utf8())])
    with sharded.create(store, schema, ["id"], [1_000, 2_000]) as s:
        s.put({"id": [1, 1_500, 2_500], "v": [1.0, 2.0, 3.0], "s": ["a", "b", "c"]})
    ray.data.from_arrow(rows(3_000)).write_datasink(BasaltDatasink(store, "data"))
    with sharded.ShardedDatabase(store, read_only=True) as s:
        # The dataset's row replaced the one put (its v is null: 1500 % 10 == 0).
        assert s.get(1_500) == {"id": 1_500, "v": None, "s": "s1500"}
    assert collect(read_basalt(store)).num_rows == 3_000
    with pytest.raises(basalt.InvalidArgumentError):
        ray.data.from_arrow(rows(10)).write_datasink(BasaltDatasink(store, "data", ["v"]))


def test_a_shard_is_cut_into_several_read_tasks_at_its_split_points(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64())])
    sharded.create(store, schema, ["id"], []).close()
    m = sharded.read_map(store)
    # Many SSTs in the one shard, so split points exist.
    with basalt.open(store / m.shards[0].path, memtable_bytes_max=256 << 10) as db:
        t = db.table("data")
        for i in range(20):
            t.write({"id": list(range(i * 20_000, (i + 1) * 20_000)), "v": [0.5] * 20_000})
            db.flush()
    tasks = BasaltDatasource(store).get_read_tasks(4)
    assert len(tasks) == 4, "one shard, four ranges"
    counts = [sum(b.num_rows for b in task()) for task in tasks]
    assert sum(counts) == 400_000 and min(counts) > 0, counts


def keep_writing(source: str, store: str, ready: Any, stop: Any) -> None:
    """A writer process: writes rows, checkpoints the source into a
    one-shard store, then goes on writing to the source."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64())])
    with basalt.open(source) as db:
        t = db.create_table("data", schema, primary_key=["id"])
        t.write({"id": list(range(10_000)), "v": [float(i) for i in range(10_000)]})
        pathlib.Path(store).mkdir()
        db.checkpoint(pathlib.Path(store) / "shard-00000")
        sharded.write_map(store, sharded.ShardMap(1, "data", ["id"], [sharded.Shard("shard-00000", None, None)]))
        ready.set()
        i = 10_000
        while not stop.is_set():
            t.write({"id": list(range(i, i + 1_000)), "v": [0.0] * 1_000})
            db.flush()
            i += 1_000


def test_a_read_while_another_process_writes_the_checkpoint_source(tmp_path: pathlib.Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    writer = ctx.Process(target=keep_writing, args=(str(tmp_path / "src"), str(tmp_path / "store"), ready, stop))
    writer.start()
    try:
        assert ready.wait(60), "the writer checkpointed"
        for _ in range(2):
            back = collect(read_basalt(tmp_path / "store", parallelism=4))
            assert back.column("id").to_pylist() == list(range(10_000))
    finally:
        stop.set()
        writer.join(60)
    assert writer.exitcode == 0


def test_a_write_is_written_once_into_files_the_shards_link(tmp_path: pathlib.Path) -> None:
    """Into an existing store, each task's files are cut at the split points
    and linked into their shard: the shards' SSTs hold the rows once, and
    no staging database is made."""
    store = tmp_path / "store"
    ray.data.from_arrow(rows(20_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=3))
    sink = BasaltDatasink(store, "data")
    sink.on_write_start()
    result = sink.write([rows(6_000, seed=3, offset=100_000)], SimpleNamespace(task_idx=0))
    files = result["files"]
    assert sum(f["rows"] for f in files) == 6_000 and {f["range"] for f in files} <= {0, 1, 2}
    staged = {os.stat(f["path"]).st_ino for f in files}
    assert not any(p.name == "CURRENT" for p in pathlib.Path(sink._write.staging_dir).rglob("*")), "no database staged"
    sink.on_write_complete(SimpleNamespace(write_returns=[result]))
    m = sharded.read_map(store)
    linked = {p.stat().st_ino for s in m.shards for p in (store / s.path).glob("*.sst")}
    assert staged <= linked, "every written file is a shard's SST (hard-linked, not rewritten)"
    assert collect(read_basalt(store)).num_rows == 26_000


def test_a_new_stores_files_cut_at_split_points_given_first_are_linked_not_rewritten(tmp_path: pathlib.Path) -> None:
    """With split points known before the write (given, or sampled by
    ``write_basalt``), a new store's files are cut at them and each is
    linked into its shard as it is."""
    store = tmp_path / "store"
    sink = BasaltDatasink(store, "data", ["id"], split_points=[5_000, 12_000])
    sink.on_write_start()
    results = [sink.write([rows(10_000, seed=task, offset=task * 3_000)], SimpleNamespace(task_idx=task)) for task in range(2)]
    files = [f for r in results for f in r["files"]]
    assert {f["range"] for f in files} == {0, 1, 2}
    staged = {os.stat(f["path"]).st_ino for f in files}
    sink.on_write_complete(SimpleNamespace(write_returns=results))
    m = sharded.read_map(store)
    assert m.split_points == [5_000, 12_000]
    linked = {p.stat().st_ino for s in m.shards for p in (store / s.path).glob("*.sst")}
    assert staged <= linked, "every written file is a shard's SST (hard-linked, not rewritten)"
    got = collect(read_basalt(store))
    assert got.column("id").to_pylist() == list(range(13_000))
    # Task 1's rows win the keys both wrote (its seqnos are higher).
    second = rows(10_000, seed=1, offset=3_000).sort_by("id")
    assert got.slice(3_000).equals(second.cast(got.schema))


def test_write_basalt_samples_split_points_before_it_writes(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    data = rows(400_000, seed=5)
    write_basalt(ray.data.from_arrow(data).repartition(6), store, "data", ["id"], shards=4)
    m = sharded.read_map(store)
    assert len(m.shards) == 4
    with sharded.ShardedDatabase(store, read_only=True) as s:
        sizes = [s.table(i).count_rows() for i in range(4)]
    assert sum(sizes) == 400_000 and min(sizes) > 85_000, sizes
    assert collect(read_basalt(store)).equals(data.sort_by("id").cast(collect(read_basalt(store)).schema))
    # A second write into the store keeps its points (nothing sampled).
    write_basalt(ray.data.from_arrow(rows(1_000, seed=6, offset=400_000)), store, "data", ["id"], shards=2)
    assert sharded.read_map(store).split_points == m.split_points


def test_split_points_that_are_wrong_are_refused_and_leave_nothing(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(basalt.InvalidArgumentError, match="2 split points make 3 shards, not 4"):
        BasaltDatasink(store, "data", ["id"], shards=4, split_points=[1, 2])
    data = ray.data.from_arrow(rows(1_000))
    # Refused in the driver, before any pass over the data.
    with pytest.raises(basalt.InvalidArgumentError, match="shards must be at least 1"):
        write_basalt(data, store, "data", ["id"], shards=0)
    with pytest.raises(basalt.InvalidArgumentError, match=r"primary key columns \['nope'\] are not in the dataset"):
        write_basalt(data, store, "data", ["nope"])
    with pytest.raises((TypeError, basalt.InvalidArgumentError), match="ascend|order"):
        write_basalt(data, store, "data", ["id"], split_points=[500, 100])
    with pytest.raises(TypeError):
        write_basalt(data, store, "data", ["id"], split_points=["x"])
    # The sink alone refuses them in its tasks.
    with pytest.raises(Exception, match="cut points must ascend strictly"):
        data.write_datasink(BasaltDatasink(store, "data", ["id"], split_points=[500, 100]))
    assert not (store / sharded.SHARD_MAP).exists(), "no store was made"
    assert shard_dirs(store) == [] and not any((store / ".staging").iterdir()), "nothing left"
    # A store that exists keeps its points: others are refused.
    write_basalt(ray.data.from_arrow(rows(1_000)), store, "data", ["id"], split_points=[500])
    with pytest.raises(Exception, match="not at the split points given"):
        write_basalt(ray.data.from_arrow(rows(10, offset=5_000)), store, "data", ["id"], split_points=[700])
    assert sharded.read_map(store).version == 1 and collect(read_basalt(store)).num_rows == 1_000


def test_two_concurrent_writers_one_commits_the_other_conflicts(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(1_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    a, b = BasaltDatasink(store, "data"), BasaltDatasink(store, "data")
    a.on_write_start()
    b.on_write_start()
    loser = b._write.tag
    ra = a.write([rows(10, offset=5_000)], SimpleNamespace(task_idx=0))
    rb = b.write([rows(10, offset=6_000)], SimpleNamespace(task_idx=0))
    a.on_write_complete(SimpleNamespace(write_returns=[ra]))
    committed = sharded.read_map(store)
    with pytest.raises(basalt.ConflictError):
        b.on_write_complete(SimpleNamespace(write_returns=[rb]))
    assert sharded.read_map(store) == committed
    assert left_by(store, loser) == [], "the loser left nothing"
    assert shard_dirs(store) == sorted(s.path for s in committed.shards)
    ids = collect(read_basalt(store)).column("id").to_pylist()
    assert 5_000 in ids and 6_000 not in ids and len(ids) == 1_010


def test_a_read_running_across_a_commit_sees_one_version(tmp_path: pathlib.Path) -> None:
    import gc

    store = tmp_path / "store"
    ray.data.from_arrow(rows(4_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    before = collect(read_basalt(store))
    reading = read_basalt(store, parallelism=4)  # pins version 1
    update = pa.table({"id": pa.array(list(range(0, 4_000, 2)), pa.int64()), "v": [9.0] * 2_000, "s": ["new"] * 2_000})
    ray.data.from_arrow(update).write_datasink(BasaltDatasink(store, "data"))
    assert sharded.read_map(store).version == 2
    assert collect(reading).equals(before), "the read saw version 1 only"
    after = collect(read_basalt(store))
    assert after.column("s").to_pylist().count("new") == 2_000
    # Once the read is gone, a collection takes version 1's directories.
    del reading
    gc.collect()
    basalt.ShardedStore(store).collect()
    assert shard_dirs(store) == sorted(s.path for s in sharded.read_map(store).shards)


def test_rays_filter_and_projection_go_into_the_engines_scan(tmp_path: pathlib.Path) -> None:
    from ray.data.expressions import col

    store = tmp_path / "store"
    data = rows(50_000)
    ray.data.from_arrow(data).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    ds = read_basalt(store).filter(expr=(col("id") >= 49_000) & (col("v") > 10.0)).select_columns(["id", "s"])
    got = collect(ds)
    want = data.filter((pa.compute.field("id") >= 49_000) & (pa.compute.field("v") > 10.0)).sort_by("id")
    assert got.column_names == ["id", "s"]
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    # The source took both: its read tasks return only those rows and columns.
    source = BasaltDatasource(store)
    pushed = source.apply_predicate((col("id") >= 49_000) & (col("v") > 10.0)).apply_projection({"id": "id"})
    blocks = [b for task in pushed.get_read_tasks(2) for b in task()]
    assert sum(b.num_rows for b in blocks) == want.num_rows
    assert all(b.column_names == ["id"] for b in blocks)
    # Float comparisons stay with PyArrow (IEEE 754); the integer one goes
    # to the engine, whose zone maps skip the blocks below 49,000.
    from basalt.ray_data import _engine_conditions

    schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
    assert _engine_conditions((col("id") >= 49_000) & (col("v") > 10.0), schema) == [("id", ">=", 49_000)]
    assert _engine_conditions(col("id").is_null() & (5 < col("id")), schema) == [("id", "is null"), ("id", ">", 5)]
    # Only literals of the column's own kind go to the engine (which would
    # refuse the others, where PyArrow casts them).
    import datetime
    from decimal import Decimal

    from ray.data.expressions import lit

    kinds = pa.schema(
        [("u", pa.uint8()), ("i", pa.int8()), ("d", pa.date32()), ("bin", pa.binary()), ("s", pa.utf8()), ("b", pa.bool_()), ("k", pa.int64())]
    )
    for left_out in [
        col("u") > -1,
        col("i") < 300,
        col("d") < lit(datetime.datetime(2020, 1, 1, 12)),
        col("bin") == "a",
        col("s") == b"a",
        col("k") == lit(Decimal(2)),
        col("b") == lit(np.bool_(True)),
        col("k") == lit(np.int64(3)),
        col("k") == True,  # noqa: E712 - a bool is not an int here
    ]:
        assert _engine_conditions(left_out, kinds) == [], left_out
    taken = (col("u") > 3) & (col("s") == "x") & (col("d") >= lit(datetime.date(2020, 1, 1))) & (col("b") == False)  # noqa: E712
    assert _engine_conditions(taken, kinds) == [
        ("u", ">", 3),
        ("s", "=", "x"),
        ("d", ">=", datetime.date(2020, 1, 1)),
        ("b", "=", False),
    ]


def test_read_tasks_report_row_counts_from_metadata(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(30_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=3))
    tasks = BasaltDatasource(store).get_read_tasks(3)
    counts = [t.metadata.num_rows for t in tasks]
    assert sum(counts) == 30_000 and all(c > 0 for c in counts), counts


def write_files_then_die(store: str) -> None:
    """A driver killed between its tasks' file writes and its commit."""
    sink = BasaltDatasink(store, "data")
    sink.on_write_start()
    sink.write([rows(500, offset=70_000)], SimpleNamespace(task_idx=0))
    os._exit(0)


def test_a_driver_killed_before_its_commit_leaves_the_previous_version(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(2_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    m = sharded.read_map(store)
    before = collect(read_basalt(store))
    ctx = multiprocessing.get_context("spawn")
    driver = ctx.Process(target=write_files_then_die, args=(str(store),))
    driver.start()
    driver.join(120)
    assert driver.exitcode == 0
    assert any((store / ".staging").iterdir()), "the dead write left its files"
    assert sharded.read_map(store) == m
    assert collect(read_basalt(store)).equals(before)
    assert basalt.ShardedStore(store).collect() >= 1
    assert not any((store / ".staging").iterdir()), "collected"
    assert shard_dirs(store) == sorted(s.path for s in m.shards)
    # And the store takes the next write.
    ray.data.from_arrow(rows(10, offset=90_000)).write_datasink(BasaltDatasink(store, "data"))
    assert collect(read_basalt(store)).num_rows == 2_010


@pytest.mark.parametrize("seed", range(4))
def test_random_writes_equal_a_single_database_oracle(tmp_path: pathlib.Path, seed: int) -> None:
    """Random writes (new store, then upserts into it; keys unique within a
    write, overlapping across writes; nulls; several tasks) read back as a
    single database that took the same rows."""
    rng = np.random.default_rng(seed)
    store = tmp_path / "store"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64()), pa.field("s", pa.utf8())])
    with basalt.open(tmp_path / "oracle") as oracle:
        t = oracle.create_table("data", schema, primary_key=["id"])
        for write in range(int(rng.integers(1, 4))):
            n = int(rng.integers(1, 3_000))
            ids = rng.choice(np.arange(-5_000, 5_000), size=n, replace=False)
            v = rng.normal(size=n)
            data = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "v": pa.array([None if x < -1.5 else float(x) for x in v], pa.float64()),
                    "s": pa.array([None if i % 9 == 0 else f"w{write}-{i}" for i in ids.tolist()], pa.utf8()),
                },
                schema=schema,
            )
            blocks = int(rng.integers(1, 5))
            dataset = ray.data.from_arrow(data).repartition(blocks)
            if rng.random() < 0.5:
                # Split points sampled before the write: files cut at them.
                write_basalt(dataset, store, "data", ["id"], shards=int(rng.integers(1, 5)))
            else:
                dataset.write_datasink(BasaltDatasink(store, "data", ["id"], shards=int(rng.integers(1, 5))))
            t.write(data)
            got = collect(read_basalt(store))
            want = t.scan().read_all()
            assert got.num_rows == want.num_rows, (seed, write)
            assert got.equals(want.cast(got.schema)), f"seed {seed}, write {write}"


def test_sql_over_a_store_ray_wrote(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    data = rows(20_000)
    ray.data.from_arrow(data).write_datasink(BasaltDatasink(store, "data", ["id"], shards=3))
    got = basalt.ShardedStore(store).sql("SELECT count(*) AS n, min(id) AS lo, max(id) AS hi, count(v) AS vs FROM data")
    assert got.to_pylist() == [{"n": 20_000, "lo": 0, "hi": 19_999, "vs": 18_000}]
    with sharded.ShardedDatabase(store, read_only=True) as s:
        few = s.sql("SELECT id, s FROM data WHERE id BETWEEN 10 AND 12 ORDER BY id")
    assert few.to_pylist() == [{"id": 10, "s": "s10"}, {"id": 11, "s": "s11"}, {"id": 12, "s": "s12"}]


def test_a_sharded_database_opened_before_a_write_commits_is_refused_not_stale(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    ray.data.from_arrow(rows(1_000)).write_datasink(BasaltDatasink(store, "data", ["id"], shards=2))
    with sharded.ShardedDatabase(store) as s:
        ray.data.from_arrow(rows(10, offset=5_000)).write_datasink(BasaltDatasink(store, "data"))
        # Its map is version 1; the store is at version 2: a put there would
        # be lost, a get stale.
        with pytest.raises(basalt.ConflictError):
            s.put({"id": [7], "v": [1.0], "s": ["x"]})
    # A write while a shard is open for writing is refused (its begin, or
    # its commit), and the put stays.
    with sharded.ShardedDatabase(store) as s:
        s.put({"id": [7], "v": [1.0], "s": ["x"]})
        with pytest.raises(basalt.Error):
            ray.data.from_arrow(rows(10, offset=6_000)).write_datasink(BasaltDatasink(store, "data"))
    with sharded.ShardedDatabase(store, read_only=True) as s:
        assert s.get(7) == {"id": 7, "v": 1.0, "s": "x"}, "the put survived"
    assert collect(read_basalt(store)).num_rows == 1_010
