"""DuckDB's ORDER BY on the shape of data spillway-bench-sort uses, made in SQL (so that it
needs only the duckdb wheel): ROWS rows of an int64 key (uniform: a hash of the row number) and
an int64 payload (the row number). The table is made in memory first (untimed); each timed run
materializes the sorted table (CREATE TABLE AS ... ORDER BY k, which keeps the order). Prints
the median of RUNS after a warm-up, in rows per second, as spillway-bench-sort does.
Usage: python bench/sort_duckdb_sql.py ROWS [THREADS [RUNS]]"""
import statistics
import sys
import time

import duckdb


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads={threads}")
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute(f"CREATE TABLE t AS SELECT (hash(range) >> 1)::BIGINT AS k, range AS v "
                f"FROM range({n})")
    times = []
    for i in range(runs + 1):
        con.execute("DROP TABLE IF EXISTS s")
        t0 = time.perf_counter()
        con.execute("CREATE TABLE s AS SELECT * FROM t ORDER BY k")
        dt = time.perf_counter() - t0
        if i > 0:
            times.append(dt)
    ok = con.execute("SELECT count(*) = sum(CASE WHEN k >= lk THEN 1 ELSE 0 END) + 1 FROM "
                     "(SELECT k, lag(k) OVER () AS lk FROM s)").fetchone()[0]
    med = statistics.median(times)
    print(f"duckdb ORDER BY: {n} rows (int64 key, int64 payload), {threads} threads | median of "
          f"{runs}: {med:.3f} sec | {n / med / 1e6:.2f} M rows/s | {'sorted' if ok else 'UNSORTED'}")


if __name__ == "__main__":
    main()
