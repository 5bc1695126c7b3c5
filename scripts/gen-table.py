"""The generated table of the load and index benchmarks (scripts/bench-load.sh,
scripts/bench-index.sh): a key, two numbers, a 16-character string, a date and
a timestamp, in random key order, written by DuckDB as CSV and Parquet.

    .venv/bin/python scripts/gen-table.py ROWS CSV PARQUET
"""

import sys

import duckdb

rows, csv, parquet = int(sys.argv[1]), sys.argv[2], sys.argv[3]
con = duckdb.connect()
con.execute(f"""CREATE TABLE g AS SELECT
  i AS id,
  (i * 7919) % 1000003 AS amount,
  ((i * 104729) % 100000) / 100.0 AS price,
  substr(md5(i::VARCHAR), 1, 16) AS tag,
  DATE '2020-01-01' + ((i % 1500)::INTEGER) AS day,
  TIMESTAMP '2020-01-01 00:00:00' + to_seconds(i) AS at
FROM range({rows}) t(i) ORDER BY hash(i)""")
con.execute(f"COPY g TO '{csv}' (HEADER)")
con.execute(f"COPY g TO '{parquet}' (FORMAT parquet)")
