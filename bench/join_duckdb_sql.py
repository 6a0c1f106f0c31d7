"""DuckDB's hash join on the shape of data spillway-bench-join uses, made in SQL (so that it
needs only the duckdb wheel, e.g. on the GPU machine): a build table of BUILD rows with keys
0 .. BUILD-1 once each, a probe table of PROBE rows whose keys are drawn uniformly from them,
two int64 payloads a side. The tables are made in memory first (untimed); each timed run
materializes the inner join (CREATE TABLE AS). Prints the median of RUNS after a warm-up, in
input rows per second, as spillway-bench-join does.
Usage: python bench/join_duckdb_sql.py BUILD PROBE [THREADS [RUNS]]"""
import statistics
import sys
import time

import duckdb


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nb, npr = int(sys.argv[1]), int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads={threads}")
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET preserve_insertion_order=false")
    t0 = time.perf_counter()
    con.execute(f"""CREATE TABLE b AS SELECT range AS k, (hash(range) >> 1)::BIGINT AS b1,
                    (hash(range + 7) >> 1)::BIGINT AS b2 FROM range({nb})""")
    con.execute(f"""CREATE TABLE p AS SELECT (hash(range * 3 + 1) % {nb})::BIGINT AS k,
                    range AS p1, (hash(range * 5 + 2) >> 1)::BIGINT AS p2 FROM range({npr})""")
    made = time.perf_counter() - t0
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        con.execute("CREATE OR REPLACE TABLE o AS SELECT * FROM p JOIN b ON p.k = b.k")
        t = time.perf_counter() - t0
        rows = con.execute("SELECT count(*) FROM o").fetchone()[0]
        assert rows == npr, (rows, npr)
        if i:
            times.append(t)
    con.execute("DROP TABLE o")
    med = statistics.median(times)
    print(f"duckdb {duckdb.__version__}, {threads} threads: join of {nb} x {npr} rows "
          f"(tables made in {made:.1f} s, untimed)")
    print(f"duckdb medians: {med:.3f} sec | {(nb + npr) / med / 1e6:.1f} M input rows/s | "
          f"runs {' '.join(f'{x:.3f}' for x in times)}")


if __name__ == "__main__":
    main()
