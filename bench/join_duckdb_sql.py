"""DuckDB's hash join on the shape of data spillway-bench-join uses, made in SQL (so that it
needs only the duckdb wheel, e.g. on the GPU machine): a build table of BUILD rows with keys
0 .. BUILD-1 once each, a probe table of PROBE rows whose keys are drawn from [0, BUILD/MATCH)
(uniformly, or by a Zipf law with --zipf, key 0 the most frequent, by the same inversion as
spillway-bench-join's), PAYLOADS int64 payloads a side. The tables are made in memory first
(untimed); each timed run materializes the join (CREATE TABLE AS). Prints the median of RUNS
after a warm-up, in input rows per second, as spillway-bench-join does.
Usage: python bench/join_duckdb_sql.py BUILD PROBE [THREADS [RUNS]] [--match F] [--zipf S]
       [--payloads N] [--type inner|left|left_semi|left_anti]"""
import argparse
import statistics
import time

import duckdb

SQL_JOIN = {"inner": "JOIN", "left": "LEFT JOIN", "left_semi": "SEMI JOIN",
            "left_anti": "ANTI JOIN"}


def main() -> None:
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("build", type=int)
    ap.add_argument("probe", type=int)
    ap.add_argument("threads", type=int, nargs="?", default=0)
    ap.add_argument("runs", type=int, nargs="?", default=3)
    ap.add_argument("--match", type=float, default=1.0)
    ap.add_argument("--zipf", type=float, default=0.0)
    ap.add_argument("--payloads", type=int, default=2)
    ap.add_argument("--type", choices=list(SQL_JOIN), default="inner")
    a = ap.parse_args()
    if not 0 < a.match <= 1 or a.payloads < 1 or a.zipf < 0:
        ap.error("--match takes (0, 1], --payloads at least 1, --zipf at least 0")
    nb, npr = a.build, a.probe
    con = duckdb.connect()
    if a.threads:
        con.execute(f"SET threads={a.threads}")
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET preserve_insertion_order=false")
    n = max(1, int(-(-nb // a.match)))  # the key range, as the bench's ceil(B / match)
    u = "((hash(range * 3 + 1) >> 11)::DOUBLE / 9007199254740992.0)"  # uniform in [0, 1)
    if a.zipf > 0:
        s = a.zipf
        x = (f"power({n} + 1, {u})" if s == 1 else
             f"power((power({n} + 1, {1 - s}) - 1) * {u} + 1, {1 / (1 - s)})")
        key = f"least({n - 1}, greatest(0, floor({x}) - 1))::BIGINT"
    else:
        key = f"(hash(range * 3 + 1) % {n})::BIGINT"
    bcols = ", ".join(f"(hash(range + {7 * (c + 1)}) >> 1)::BIGINT AS b{c + 1}"
                      for c in range(a.payloads))
    pcols = ", ".join(["range AS p1"] + [f"(hash(range * 5 + {c}) >> 1)::BIGINT AS p{c + 1}"
                                          for c in range(1, a.payloads)])
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE b AS SELECT range AS k, {bcols} FROM range({nb})")
    con.execute(f"CREATE TABLE p AS SELECT {key} AS k, {pcols} FROM range({npr})")
    made = time.perf_counter() - t0
    sel = "p.*" if a.type in ("left_semi", "left_anti") else "*"
    times, rows = [], 0
    for i in range(a.runs + 1):
        t0 = time.perf_counter()
        con.execute(f"CREATE OR REPLACE TABLE o AS SELECT {sel} FROM p {SQL_JOIN[a.type]} b "
                    f"ON p.k = b.k")
        t = time.perf_counter() - t0
        rows = con.execute("SELECT count(*) FROM o").fetchone()[0]
        if a.match == 1 and a.type in ("inner", "left", "left_semi"):
            assert rows == npr, (rows, npr)
        if i:
            times.append(t)
    con.execute("DROP TABLE o")
    med = statistics.median(times)
    print(f"duckdb {duckdb.__version__}, {threads} threads: {a.type} join of {nb} x {npr} rows, "
          f"match {a.match}, {'Zipf ' + str(a.zipf) if a.zipf else 'uniform'} keys, "
          f"{a.payloads} payloads a side, {rows} output rows (tables made in {made:.1f} s, "
          f"untimed)")
    print(f"duckdb medians: {med:.3f} sec | {(nb + npr) / med / 1e6:.1f} M input rows/s | "
          f"runs {' '.join(f'{x:.3f}' for x in times)}")


if __name__ == "__main__":
    main()
