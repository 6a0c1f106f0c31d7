"""DuckDB's GROUP BY on the shape of data spillway-bench-groupby uses, made in SQL (so that it
needs only the duckdb wheel, e.g. on the GPU machine): ROWS rows of an int64 value g = 0 ..
ROWS-1 and an int64 key (g * P) % GROUPS, P prime to GROUPS as the benchmark picks it. The
table is made in memory first (untimed); each timed run materializes the groups with count,
sum, min and max of the value (CREATE TABLE AS). Prints the median of RUNS after a warm-up, in
input rows per second, as spillway-bench-groupby does.
Usage: python bench/groupby_duckdb_sql.py ROWS GROUPS [THREADS [RUNS]]"""
import math
import statistics
import sys
import time

import duckdb


def stride_for(k: int) -> int:
    p = 2654435761 % k
    while math.gcd(p, k) != 1:
        p += 1
    return p


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, k = int(sys.argv[1]), int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads={threads}")
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET preserve_insertion_order=false")
    p = stride_for(k)
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE t AS SELECT ((range % {k}) * {p}) % {k} AS k, range AS v "
                f"FROM range({n})")
    made = time.perf_counter() - t0
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        con.execute("CREATE OR REPLACE TABLE o AS SELECT k, count(v) AS c, sum(v) AS s, "
                    "min(v) AS lo, max(v) AS hi FROM t GROUP BY k")
        t = time.perf_counter() - t0
        groups = con.execute("SELECT count(*) FROM o").fetchone()[0]
        assert groups == min(n, k), (groups, n, k)
        if i:
            times.append(t)
    med = statistics.median(times)
    print(f"duckdb {duckdb.__version__}, {threads} threads: GROUP BY of {n} rows into {k} groups "
          f"(table made in {made:.1f} s, untimed)")
    print(f"duckdb medians: {med:.3f} sec | {n / med / 1e6:.1f} M rows/s | "
          f"runs {' '.join(f'{x:.3f}' for x in times)}")


if __name__ == "__main__":
    main()
