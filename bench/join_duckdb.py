"""The local hash join (spillway.join_tables) against DuckDB on the same data and threads:
BUILD x PROBE rows (default 2 M x 8 M), int64 keys (each probe key matches one build row: the
shape spillway-bench-join uses), two int64 payloads a side; both results materialized (a
spillway Table; a DuckDB table). Medians of 3 after a warm-up.
Usage: python bench/join_duckdb.py [BUILD PROBE [THREADS]]"""
import sys
import time, statistics, numpy as np, pyarrow as pa, duckdb, spillway
from spillway import _spillway
nb = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
npr = int(sys.argv[2]) if len(sys.argv) > 2 else 8_000_000
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
rng = np.random.default_rng(1)
bk = rng.permutation(nb).astype(np.int64)
pk = rng.integers(0, nb, npr, dtype=np.int64)
build = {"k": bk, "b1": rng.integers(0, 1 << 40, nb, dtype=np.int64), "b2": rng.integers(0, 1 << 40, nb, dtype=np.int64)}
probe = {"k": pk, "p1": rng.integers(0, 1 << 40, npr, dtype=np.int64), "p2": rng.integers(0, 1 << 40, npr, dtype=np.int64)}
br = spillway.BufferResource(use_gpu=False)
L = spillway.from_dlpack(probe, br); R = spillway.from_dlpack(build, br)
con = duckdb.connect(); con.execute(f"SET threads={threads}")
con.register("p", pa.table(probe)); con.register("b", pa.table(build))
con.execute("CREATE TABLE pt AS SELECT * FROM p"); con.execute("CREATE TABLE bt AS SELECT * FROM b")
sp, dk = [], []
for i in range(4):
    t0 = time.perf_counter(); out = _spillway.join_tables(L, R, [0], [0], "inner", br); t1 = time.perf_counter()
    n = out.num_rows; del out
    t2 = time.perf_counter(); con.execute("CREATE OR REPLACE TABLE o AS SELECT * FROM pt JOIN bt ON pt.k = bt.k"); t3 = time.perf_counter()
    m = con.execute("SELECT count(*) FROM o").fetchone()[0]
    if i: sp.append(t1 - t0); dk.append(t3 - t2)
assert n == m == npr, (n, m)
rows = nb + npr
print(f"spillway local join  median {statistics.median(sp):.3f} s  {rows/statistics.median(sp)/1e6:.1f} M input rows/s  runs {['%.3f'%x for x in sp]}")
print(f"duckdb {threads} threads     median {statistics.median(dk):.3f} s  {rows/statistics.median(dk)/1e6:.1f} M input rows/s  runs {['%.3f'%x for x in dk]}")
print(f"ratio spillway/duckdb throughput {statistics.median(dk)/statistics.median(sp):.2f}")
