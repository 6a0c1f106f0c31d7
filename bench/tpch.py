"""TPC-H queries end to end on local ranks, as spillway.streaming networks, checked against
DuckDB running the TPC-H SQL on the same files:

    python3 bench/tpch.py --query 1 --scale 1 --ranks 2 --host-limit 25%

Queries 1, 4, 9 and 18, and `join` (partsupp x lineitem on (partkey, suppkey), the sums of its
rows); `all` runs each. tpchgen-cli (PyPI) writes the tables as Parquet, one part per rank. Each
rank's network reads its parts with pyarrow a batch at a time (decimals as int64 hundredths,
dates as int32 days), filters and projects in Python maps, and joins, groups and sorts in
spillway's C++ actors (on the GPU with --gpu), all at once under the rank's limits. A run
prints the plan of actors, each actor's time and waits (rank 0), each tier's peak beside its
limit, the time end to end (from the Parquet files) beside DuckDB's on the same files and
cores, and whether the answer is DuckDB's (the same rows; sums exact to the cent). Exit code
1 if an answer differs.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import spillway
from spillway import _spillway
from spillway.comm import local

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tpch_queries as Q  # noqa: E402

EPOCH_ORDINAL = 719163  # date(1970, 1, 1).toordinal()


def generate(scale: float, parts: int, out: Path, tables: list[str]) -> None:
    """Each part of `tables` that is missing, in parallel (tpchgen-cli, a process per part)."""
    exe = shutil.which("tpchgen-cli")
    if exe is None:
        raise SystemExit("tpch: tpchgen-cli not found (pip install tpchgen-cli)")
    todo = [t for t in tables if not (out / t / f"{t}.1.parquet").exists()]
    if not todo:
        return

    def part(p: int) -> None:
        subprocess.run([exe, "parquet", "-s", str(scale), f"--tables={','.join(todo)}",
                        f"--parts={parts}", f"--part={p}", f"--output-dir={out}"],
                       check=True, capture_output=True)

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(part, range(1, parts + 1)))


def hundredths(col):
    """A decimal column of scale 2 as int64 hundredths: the low 64 bits of each 128-bit unscaled
    value (TPC-H's values fit), viewed without arithmetic; another scale is multiplied."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    if col.type.scale != 2:
        return pc.cast(pc.multiply(col, pa.scalar(10 ** (2 - col.type.scale))), pa.int64())
    chunks = []
    for c in col.chunks:
        words = np.frombuffer(c.buffers()[1], dtype=np.int64, count=2 * (c.offset + len(c)))
        low = np.ascontiguousarray(words[2 * c.offset::2])
        if c.null_count and c.offset:  # a validity bitmap that does not start at bit 0
            chunks.append(pa.array(low, mask=c.is_null().to_numpy(zero_copy_only=False)))
        else:
            chunks.append(pa.Array.from_buffers(
                pa.int64(), len(c), [c.buffers()[0] if c.null_count else None, pa.py_buffer(low)],
                null_count=c.null_count))
    return pa.chunked_array(chunks, pa.int64())


def to_spillway_types(table):
    """Decimals as int64 hundredths, dates as int32 days, string views as strings."""
    import pyarrow as pa
    cols = {}
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_decimal(t):
            col = hundredths(col)
        elif pa.types.is_date32(t):
            col = col.cast(pa.int32())
        elif t == pa.string_view() or t == pa.large_string():
            col = col.cast(pa.string())
        cols[name] = col
    return pa.table(cols)


def reader(data: Path, table: str, rank: int, columns: list[str], batch_rows: int):
    """This rank's part of `table`, a batch at a time (a table small enough to be written as
    one part, such as nation, is rank 0's; the others read none of it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = data / table / f"{table}.{rank + 1}.parquet"
    if not path.exists():
        schema = pq.read_schema(data / table / f"{table}.1.parquet")
        yield to_spillway_types(schema.empty_table().select(columns))
        return
    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns):
        yield to_spillway_types(pa.Table.from_batches([batch]))


def rank_main(comm, br, query: str, data: Path, batch_rows: int, gpu: bool):
    comm.barrier()
    t0 = time.perf_counter()  # from the Parquet files (the sources read their first batches)
    net = spillway.streaming.Network(comm, br, tier="DEVICE" if gpu else "HOST")
    sources = {t: net.source(reader(data, t, comm.rank, cols, batch_rows), name=f"read {t}",
                             batch_rows=batch_rows)
               for t, cols in Q.TABLES[query].items()}
    result = net.collect(Q.BUILD[query](net, sources))
    report = net.run()
    seconds = time.perf_counter() - t0
    rows = [tuple(r.values()) for t in result.tables() for r in t.to_pylist()]
    peaks = {t: (br.peak(t), br.limit(t)) for t in ("DEVICE", "PINNED_HOST", "HOST", "DISK")
             if br.is_live(t)}
    return rows, seconds, peaks, net.plan(), report.timeline


def duckdb_answer(query: str, data: Path, threads: int):
    import duckdb
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    for t in Q.TABLES[query]:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{data}/{t}/*.parquet')")
    t0 = time.perf_counter()
    rows = con.execute(Q.SQL[query]).fetchall()
    return rows, time.perf_counter() - t0


def same(query: str, got: list[tuple], want: list[tuple]) -> bool:
    """DuckDB's rows in spillway's units equal spillway's (averages to 1e-9, relatively)."""
    if len(got) != len(want):
        return False
    averages = Q.AVERAGE_SCALE.get(query, {})
    for g, w in zip(got, want):
        for i, (scale, x, y) in enumerate(zip(Q.SCALES[query], g, w)):
            if scale == "float":
                if not math.isclose(x / averages.get(i, 1), float(y), rel_tol=1e-9):
                    return False
            elif scale == "date":
                if x != y.toordinal() - EPOCH_ORDINAL:
                    return False
            elif scale is None:
                if x != y:
                    return False
            elif x != int(Decimal(y).scaleb(scale)):
                return False
    return True


def run_query(query: str, args, data: Path, limits: dict, batch_rows: int) -> bool:
    generate(args.scale, args.ranks, data, list(Q.TABLES[query]))
    t0 = time.perf_counter()
    results = local(args.ranks, rank_main, query, data, batch_rows, args.gpu, **limits)
    total = time.perf_counter() - t0
    got = Q.finish(query, [row for r in results for row in r[0]])
    want, duck_seconds = duckdb_answer(query, data, os.cpu_count() or 1)
    ok = same(query, got, want)
    slowest = max(r[1] for r in results)
    print(f"\n== query {query}: plan (each rank)\n{results[0][3]}")
    print(f"actors of rank 0 (ms):\n{results[0][4]}")
    for r, res in enumerate(results):
        print(f"rank {r}: peaks " + ", ".join(
            f"{t} {peak / 2**20:.1f} MiB of "
            f"{'unlimited' if lim >= 2**62 else f'{lim / 2**20:.1f} MiB'}"
            for t, (peak, lim) in res[2].items()))
    print(f"query {query}: {len(got)} rows {'== DuckDB' if ok else '!= DuckDB'} | spillway "
          f"{slowest:.3f} s end to end (slowest rank; {total:.3f} s with the ranks' start) | "
          f"DuckDB {duck_seconds:.3f} s on {os.cpu_count()} cores | DuckDB / spillway "
          f"{duck_seconds / slowest:.2f}")
    if not ok:
        print(f"  spillway: {got[:5]}\n  DuckDB:   {want[:5]}")
    return ok


def data_bytes(data: Path) -> int:
    """The data's size in memory: the Parquet files' uncompressed bytes."""
    import pyarrow.parquet as pq
    total = 0
    for f in data.rglob("*.parquet"):
        md = pq.ParquetFile(f).metadata
        total += sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/tpch.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--query", default="1", choices=["1", "4", "9", "18", "join", "all"],
                   help="the query (default 1)")
    p.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument("--ranks", type=int, default=2, help="local ranks (threads; default 2)")
    p.add_argument("--data", default=None, help="where the Parquet files go (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--host-limit", default=None,
                   help="each rank's HOST limit: bytes, '4GiB', or 'N%%' of a rank's share of the "
                        "data (its uncompressed size; e.g. 25%%)")
    p.add_argument("--device-limit", default=None,
                   help="each rank's DEVICE limit, as --host-limit (with --gpu)")
    p.add_argument("--gpu", action="store_true", help="the C++ actors on the GPU")
    args = p.parse_args(argv)
    if args.ranks < 1 or args.scale <= 0:
        p.error("--ranks and --scale must be positive")
    if args.gpu and not _spillway.cuda_available():
        p.error("--gpu: no GPU here (or spillway was built without CUDA)")
    if args.device_limit and not args.gpu:
        p.error("--device-limit needs --gpu")
    queries = ["1", "4", "9", "18", "join"] if args.query == "all" else [args.query]
    tmp = None
    data = Path(args.data) if args.data else Path(tmp := tempfile.mkdtemp(prefix="spillway-tpch-"))
    try:
        every = sorted({t for q in queries for t in Q.TABLES[q]})
        t0 = time.perf_counter()
        generate(args.scale, args.ranks, data, every)
        share = data_bytes(data) / args.ranks

        def per_rank(limit):
            return int(share * float(limit[:-1]) / 100) if limit and limit.endswith("%") else limit
        limit, device_limit = per_rank(args.host_limit), per_rank(args.device_limit)
        print(f"tpch: scale {args.scale}, {args.ranks} local ranks, data "
              f"{data_bytes(data) / 2**20:.1f} MiB uncompressed (generated in "
              f"{time.perf_counter() - t0:.1f} s), host limit per rank "
              f"{limit if limit is not None else 'none'}, device limit per rank "
              f"{device_limit if device_limit is not None else 'none'}")
        limits = {"use_gpu": args.gpu}
        if limit is not None:
            limits["host_limit"] = limit
        if device_limit is not None:
            limits["device_limit"] = device_limit
        # Batches of 128 Ki rows (a few MiB: the steps of a batch stay in cache and the actors
        # overlap; 4 Mi on the GPU), and at most a sixteenth of the working tier's limit.
        limit_bytes = _spillway.BufferResource(**limits).limit("DEVICE" if args.gpu else "HOST")
        batch_rows = min(1 << 22 if args.gpu else 1 << 17, max(1024, limit_bytes // 16 // 64))
        ok = [run_query(q, args, data, limits, batch_rows) for q in queries]
        return 0 if all(ok) else 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
