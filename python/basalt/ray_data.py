"""Ray Data over sharded Basalt stores (``basalt.sharded``), the optional
``ray`` extra (``pip install 'basalt[ray]'``). Named ``ray_data`` so that
``from basalt import ray_data`` never shadows the ``ray`` package.

``read_basalt(path)`` is a ``ray.data.Dataset`` with one read task per key
range: each shard cut into several ranges (``Table.split_points``) when the
requested parallelism asks for more tasks than there are shards. A task
opens its shard read-only (any number of processes may) and streams the
engine's Arrow batches, with the projection and filter applied by the
engine's scan.

``Dataset.write_datasink(BasaltDatasink(path, table, primary_key,
shards=N))`` writes a dataset: each write task writes its blocks into a
staging database of its own (the single-writer rule holds: one task, one
database); once every task succeeded, the driver makes the next version of
each shard (a checkpoint of the current one: hard links), merges the rows
of its key range from every staging database into it (one Ray task per
shard, its only writer), and only then replaces the shard map. A failed
task, or a failure before the map is replaced, leaves the previous version
as it was (the staging data and new shard versions are removed).
"""

from __future__ import annotations

import math
import os
import pathlib
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

try:
    import ray
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("basalt.ray_data needs Ray Data: pip install 'basalt[ray]'") from e
from ray.data import Datasink, Datasource
from ray.data.block import BlockMetadata
from ray.data.datasource import ReadTask

import basalt
from basalt import sharded

#: Rows a read task gathers into one block handed to Ray.
BLOCK_ROWS = 1 << 16
#: One key in this many written rows is sampled to choose split points.
SAMPLE_EVERY = 64
STAGING = ".staging"


def _files_bytes(directory: str) -> int:
    total = 0
    for entry in os.scandir(directory):
        if entry.name.endswith((".sst", ".blob")):
            total += entry.stat().st_size
    return total


def _scan_args(lower: Any, upper: Any) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if lower is not None:
        args["start"] = lower
    if upper is not None:
        args["end"] = upper
    return args


def _read_range(
    path: str,
    table: str,
    lower: Any,
    upper: Any,
    columns: list[str] | None,
    where: list[Any] | None,
    options: dict[str, Any],
) -> Callable[[], Iterator[pa.Table]]:
    def read() -> Iterator[pa.Table]:
        with basalt.open(path, read_only=True, create=False, **options) as db:
            scan = db.table(table).scan(columns=columns, where=where, **_scan_args(lower, upper))
            batches: list[pa.RecordBatch] = []
            rows = 0
            for batch in scan:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= BLOCK_ROWS:
                    yield pa.Table.from_batches(batches, schema=scan.schema)
                    batches, rows = [], 0
            if batches:
                yield pa.Table.from_batches(batches, schema=scan.schema)

    return read


class BasaltDatasource(Datasource):
    """A sharded Basalt store's table as a Ray Data source."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        table: str | None = None,
        columns: Sequence[str] | None = None,
        filter: Iterable[Any] | None = None,
        **options: Any,
    ) -> None:
        # Ray's projection pushdown reads this attribute.
        self._projection_map = None
        self._path = str(path)
        self._map = sharded.read_map(path)
        if table is not None and table != self._map.table:
            raise basalt.InvalidArgumentError(f"{path} holds table {self._map.table!r}, not {table!r}")
        self._columns = list(columns) if columns else None
        self._filter = list(filter) if filter is not None else None
        self._options = options

    def get_name(self) -> str:
        return "Basalt"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(_files_bytes(os.path.join(self._path, s.path)) for s in self._map.shards)

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        shards = self._map.shards
        per_shard = max(1, math.ceil(max(parallelism, 1) / len(shards)))
        tasks = []
        for shard in shards:
            path = os.path.join(self._path, shard.path)
            with basalt.open(path, read_only=True, create=False, **self._options) as db:
                t = db.table(self._map.table)
                points = t.split_points(per_shard) if per_shard > 1 else []
                schema = t.schema
            if self._columns is not None:
                schema = pa.schema([schema.field(c) for c in self._columns])
            bounds = [shard.lower, *points, shard.upper]
            size = _files_bytes(path) // (len(bounds) - 1)
            for lower, upper in zip(bounds, bounds[1:]):
                metadata = BlockMetadata(num_rows=None, size_bytes=size, exec_stats=None, input_files=None)
                read = _read_range(path, self._map.table, lower, upper, self._columns, self._filter, self._options)
                tasks.append(ReadTask(read, metadata, schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks


def read_basalt(
    path: str | os.PathLike[str],
    table: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Iterable[Any] | None = None,
    *,
    parallelism: int = -1,
    **options: Any,
) -> ray.data.Dataset:
    """The table of the sharded store at ``path`` as a ``ray.data.Dataset``,
    in key order (with Ray's ``preserve_order``). ``columns`` and
    ``filter`` (``Table.scan``'s ``where=``: ``[(column, op, value), …]``)
    are applied by the engine; ``options`` are ``basalt.open``'s."""
    source = BasaltDatasource(path, table, columns, filter, **options)
    dataset: ray.data.Dataset = (
        ray.data.read_datasource(source, override_num_blocks=parallelism)
        if parallelism > 0
        else ray.data.read_datasource(source)
    )
    return dataset


def _map_names(path: pathlib.Path, m: sharded.ShardMap) -> bool:
    """Whether the store's map on disk is ``m``."""
    try:
        return sharded.read_map(path) == m
    except basalt.Error:
        return False


def _sample_keys(data: pa.Table, primary_key: Sequence[str]) -> list[Any]:
    """One key in ``SAMPLE_EVERY`` rows of ``data``."""
    picked = data.select(list(primary_key)).take(pa.array(range(0, data.num_rows, SAMPLE_EVERY), pa.int64()))
    return sharded.row_keys(picked, primary_key)


def _chain_first(first: pa.Table, rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield first
    for t in rest:
        if t.num_rows > 0:
            yield t


def _quantiles(sample: list[Any], parts: int) -> list[Any]:
    sample.sort()
    points: list[Any] = []
    for i in range(1, parts):
        point = sample[i * len(sample) // parts]
        if not points or points[-1] < point:
            points.append(point)
    return points


@ray.remote
def _merge_shard(
    new_dir: str,
    base_dir: str | None,
    table: str,
    schema: pa.Schema,
    primary_key: list[str],
    lower: Any,
    upper: Any,
    staged: list[str],
    options: dict[str, Any],
) -> int:
    """Makes the next version of one shard: its current version (hard
    links) plus the rows of its key range from every staging database."""
    if base_dir is not None:
        # Read-only: readers of the current version are not locked out.
        try:
            with basalt.open(base_dir, read_only=True, create=False, **options) as base:
                base.checkpoint(new_dir)
        except basalt.ReadOnlyError:
            # Its WAL holds writes (a writable handle closed without a
            # flush): flush them (readers are locked out for that moment).
            with basalt.open(base_dir, create=False, **options) as base:
                base.flush()
            with basalt.open(base_dir, read_only=True, create=False, **options) as base:
                base.checkpoint(new_dir)
    target = basalt.open(new_dir, **options)
    try:
        if base_dir is None:
            target.create_table(table, schema, primary_key=primary_key)
        t = target.table(table)
        sources = [basalt.open(stage, read_only=True, create=False, **options) for stage in staged]
        try:
            # Each staging database's range is in key order; the load
            # sorts the runs together (a later source wins a repeated key)
            # and writes SSTs past the WAL, all or nothing.
            batches = (
                batch.cast(schema) if batch.schema != schema else batch
                for src in sources
                for batch in src.table(table).scan(**_scan_args(lower, upper))
            )
            rows: int = t.bulk_load(pa.RecordBatchReader.from_batches(schema, batches))
        finally:
            for src in sources:
                src.close()
        return rows
    finally:
        target.close()


class BasaltDatasink(Datasink[dict[str, Any]]):
    """Writes a dataset into a sharded Basalt store (created with ``shards``
    shards, split at sampled keys, when ``path`` holds none yet)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        table: str = "data",
        primary_key: Sequence[str] | None = None,
        *,
        shards: int = 4,
        **options: Any,
    ) -> None:
        self._path = pathlib.Path(path)
        self._table = table
        self._primary_key = list(primary_key) if primary_key else None
        self._shards = shards
        self._options = options
        self._staging = self._path / STAGING / uuid.uuid4().hex
        if shards < 1:
            raise basalt.InvalidArgumentError("shards must be at least 1")

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        self._base_version = 0
        if (self._path / sharded.SHARD_MAP).exists():
            existing = sharded.read_map(self._path)
            if existing.table != self._table:
                raise basalt.InvalidArgumentError(f"{self._path} holds table {existing.table!r}")
            if self._primary_key and self._primary_key != existing.primary_key:
                raise basalt.InvalidArgumentError(
                    f"{self._path} is keyed by {existing.primary_key}, not {self._primary_key}"
                )
            self._primary_key = existing.primary_key
            self._base_version = existing.version
        if not self._primary_key:
            raise basalt.InvalidArgumentError("a new store needs primary_key")
        self._staging.mkdir(parents=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any]:
        """Writes this task's blocks into a staging database of its own."""
        assert self._primary_key is not None
        directory = self._staging / f"task-{uuid.uuid4().hex}"
        rows = 0
        sample: list[Any] = []
        schema: pa.Schema | None = None
        tables = (block if isinstance(block, pa.Table) else pa.Table.from_pandas(block) for block in blocks)
        first = next((t for t in tables if t.num_rows > 0), None)
        if first is not None:
            # Key columns hold no nulls (the engine requires it).
            schema = pa.schema([f.with_nullable(False) if f.name in self._primary_key else f for f in first.schema])
            key_names = self._primary_key

            def batches() -> Iterator[pa.RecordBatch]:
                for data in _chain_first(first, tables):
                    sample.extend(_sample_keys(data, key_names))
                    yield from data.cast(schema).to_batches()

            with basalt.open(directory, **self._options) as db:
                table = db.create_table(self._table, schema, primary_key=self._primary_key)
                # Written straight to SSTs (no WAL), sorted in bounded memory.
                rows = table.bulk_load(pa.RecordBatchReader.from_batches(schema, batches()))
        return {"dir": str(directory), "rows": rows, "sample": sample, "schema": schema}

    def on_write_complete(self, write_result: Any) -> None:
        try:
            with sharded.write_lock(self._path):
                self._commit(write_result)
        finally:
            shutil.rmtree(self._staging, ignore_errors=True)

    def _commit(self, write_result: Any) -> None:
        """Under the store's write lock: the next version of every shard,
        then the map naming it. Until the map is replaced nothing the
        current map names is touched; after it, nothing this commit made is
        deleted."""
        assert self._primary_key is not None
        returns = [r for r in write_result.write_returns if r and r["rows"] > 0]
        staged = [r["dir"] for r in returns]
        existing = sharded.read_map(self._path) if (self._path / sharded.SHARD_MAP).exists() else None
        if (existing.version if existing else 0) != self._base_version:
            raise basalt.BusyError(f"{self._path}: another write committed a new version while this one ran")
        schema = next((r["schema"] for r in returns if r["schema"] is not None), None)
        if existing is None and schema is None:
            raise basalt.InvalidArgumentError("nothing written: a new store needs rows")
        version = existing.version + 1 if existing else 1
        if existing is not None:
            base = existing
            with basalt.open(self._path / existing.shards[0].path, read_only=True, create=False) as db:
                schema = db.table(existing.table).schema
        else:
            # Checked before any work: keys the map cannot hold fail here.
            assert schema is not None
            key_schema = pa.schema([schema.field(c) for c in self._primary_key])
            points = _quantiles([k for r in returns for k in r["sample"]], self._shards)
            base = sharded.new_map(self._table, key_schema, points)
        # Names no other write uses, even one that crashed.
        tag = uuid.uuid4().hex[:8]
        new_map = base.with_paths(version, [f"shard-{i:05d}.v{version}-{tag}" for i in range(len(base.shards))])
        new_shards = new_map.shards
        merges = [
            _merge_shard.remote(
                str(self._path / s.path),
                str(self._path / existing.shards[i].path) if existing else None,
                self._table,
                schema,
                self._primary_key,
                s.lower,
                s.upper,
                staged,
                self._options,
            )
            for i, s in enumerate(new_shards)
        ]
        # Every merge ends (or fails) before anything is cleaned up, so no
        # merge writes into a directory after its removal.
        failures = []
        for merge in merges:
            try:
                ray.get(merge)
            except Exception as e:  # noqa: BLE001 - reported after the cleanup
                failures.append(e)
        committed = False
        try:
            if failures:
                raise failures[0]
            sharded.write_map(self._path, new_map)
            committed = True
        finally:
            if not committed and _map_names(self._path, new_map):
                # The map was replaced before an error (its directory sync).
                committed = True
            if not committed:
                for s in new_shards:
                    shutil.rmtree(self._path / s.path, ignore_errors=True)
        if existing is not None:
            for s in existing.shards:
                shutil.rmtree(self._path / s.path, ignore_errors=True)

    def on_write_failed(self, error: Exception) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
