"""Walks of Python's key iterators, for before/after comparisons of one
engine build against another (install one, run, install the other, run):
300K keys of 16 bytes with 100-byte values in one compacted file;
``items()``, ``keys()`` and ``values()`` over all of them and ten-entry
``items()`` walks from 5,000 start keys, each the median of 7. Usage::

    python python/bench/kv_iter_ab.py
"""

import time, statistics, tempfile, random, basalt
n = 300_000
db = basalt.open(tempfile.mkdtemp())
rng = random.Random(1)
vals = [rng.randbytes(100) for _ in range(1024)]
for i in range(0, n, 1000):
    wb = db.write_batch()
    for j in range(i, i + 1000):
        wb.put(b"key%013d" % j, vals[j % 1024])
    wb.commit()
db.flush(); db.compact(); db.wait_for_background_work()
res = {}
for what in ["items", "keys", "values", "short"]:
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        c = 0
        if what == "short":
            for s in range(5000):
                k = b"key%013d" % (s * 13 % n)
                m = 0
                for kv in db.items(k):
                    m += 1
                    if m == 10: break
                c += m
        else:
            c = sum(1 for _ in getattr(db, what)())
        ts.append(time.perf_counter() - t)
    res[what] = (c, statistics.median(ts))
for k, (c, t) in res.items():
    print(f"{k}: {c} in {t*1000:.1f} ms, {c/t/1e6:.2f} M/s")
