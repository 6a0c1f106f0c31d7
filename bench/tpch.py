"""TPC-H's partsupp x lineitem join and Q1, end to end on local ranks, checked against DuckDB:

    python3 bench/tpch.py --scale 1 --ranks 2 --host-limit 25%

tpchgen-cli (PyPI) writes `partsupp` and `lineitem` as Parquet, each rank its own part. Each
rank reads its part with pyarrow; the join is spillway.hash_join (both tables shuffled on
(partkey, suppkey), each partition pair joined as soon as both sides have arrived, on the GPU
with --gpu); Q1's aggregation is a partial group-by per rank, the partials shuffled on the
group keys, then the final one. Both results are compared with DuckDB running the same SQL on
the same files: the same row count and the same order-independent checksum (sums of exact
integer columns). Decimals travel as int64 hundredths and dates as int32 days.

Prints the plan, the time of each phase (slowest rank), each tier's peak beside its limit,
and DuckDB's time for the same queries on this machine. Exit code 1 if a result differs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import spillway
from spillway import _spillway, hash_join, shuffle
from spillway.comm import local

LINEITEM = ["l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_extendedprice",
            "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate"]
PARTSUPP = ["ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost"]
Q1_DATE = 10471  # 1998-09-02 (1998-12-01 - 90 days) in days since 1970-01-01

JOIN_SQL = """
SELECT count(*) AS rows, sum(l_orderkey) AS orderkeys, sum(ps_availqty) AS availqty,
       sum(CAST(ps_supplycost * 100 AS BIGINT)) AS supplycost,
       sum(CAST(l_extendedprice * 100 AS BIGINT)) AS extendedprice
FROM read_parquet('{d}/lineitem/*.parquet') JOIN read_parquet('{d}/partsupp/*.parquet')
  ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey
"""
Q1_SQL = """
SELECT l_returnflag, l_linestatus, CAST(sum(l_quantity) * 100 AS BIGINT) AS sum_qty,
       CAST(sum(l_extendedprice) * 100 AS BIGINT) AS sum_base_price,
       CAST(sum(l_extendedprice * (1 - l_discount)) * 10000 AS BIGINT) AS sum_disc_price,
       count(*) AS count_order
FROM read_parquet('{d}/lineitem/*.parquet')
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus
"""


def generate(scale: float, parts: int, out: Path) -> None:
    """Each part of partsupp and lineitem, in parallel (tpchgen-cli, one process per part)."""
    exe = shutil.which("tpchgen-cli")
    if exe is None:
        raise SystemExit("tpch: tpchgen-cli not found (pip install tpchgen-cli)")

    def part(p: int) -> None:
        subprocess.run([exe, "parquet", "-s", str(scale), "--tables=partsupp,lineitem",
                        f"--parts={parts}", f"--part={p}", f"--output-dir={out}"],
                       check=True, capture_output=True)

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(part, range(1, parts + 1)))


def to_spillway_types(table):
    """Decimals as int64 hundredths, dates as int32 days, string views as strings."""
    import pyarrow as pa
    import pyarrow.compute as pc
    cols = {}
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_decimal(t):
            col = pc.cast(pc.multiply(col, pa.scalar(100, pa.decimal128(3, 0))), pa.int64())
        elif pa.types.is_date32(t):
            col = col.cast(pa.int32())
        elif t == pa.string_view() or t == pa.large_string():
            col = col.cast(pa.string())
        cols[name] = col
    return pa.table(cols)


def read_part(data: Path, table: str, rank: int, columns):
    import pyarrow.parquet as pq
    return to_spillway_types(pq.read_table(data / table / f"{table}.{rank + 1}.parquet",
                                           columns=columns))


class Phases:
    """Each phase's time on the slowest rank."""

    def __init__(self):
        self.lock = threading.Lock()
        self.slowest: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.slowest[name] = max(self.slowest.get(name, 0.0), seconds)


def rank_main(comm, br, data: Path, phases: Phases, batch_rows: int, gpu: bool):
    import pyarrow as pa
    import pyarrow.compute as pc
    t0 = time.perf_counter()
    lineitem = read_part(data, "lineitem", comm.rank, LINEITEM)
    partsupp = read_part(data, "partsupp", comm.rank, PARTSUPP)
    phases.add("read", time.perf_counter() - t0)

    torch = None
    if gpu:
        try:
            import torch
        except ImportError:
            pass
    # The distributed join (ops::hash_join): both sides into the same partitions, each pair
    # joined as it arrives (the others wait in spillway, spillable), on the GPU with `gpu`;
    # its output a chunk at a time.
    t0 = time.perf_counter()
    sums = [0, 0, 0, 0, 0]
    left = lineitem.select(["l_orderkey", "l_partkey", "l_suppkey", "l_extendedprice"])
    chunks = hash_join(left, partsupp, ["l_partkey", "l_suppkey"], comm, br,
                       right_on=["ps_partkey", "ps_suppkey"], op_id=1, batch_rows=batch_rows,
                       device=gpu)
    summed = ["l_orderkey", "ps_availqty", "ps_supplycost", "l_extendedprice"]
    consumed = 0.0  # time spent on the chunks handed over
    for _, j in chunks:
        t1 = time.perf_counter()
        sums[0] += j.num_rows
        if not isinstance(j, pa.Table) and torch is not None:
            # A chunk on the GPU, summed there (int64 sums, exact), its columns viewed
            # through DLPack: no copy to the host.
            for i, c in enumerate(summed, 1):
                sums[i] += int(torch.from_dlpack(j.column(c)).sum().item())
            consumed += time.perf_counter() - t1
            continue
        if not isinstance(j, pa.Table):
            j = pa.table(j)  # a chunk on the GPU, through a host copy
        for i, c in enumerate(summed, 1):
            sums[i] += pc.sum(j.column(c)).as_py() or 0
        consumed += time.perf_counter() - t1
    phases.add("shuffle + join", time.perf_counter() - t0)
    phases.add("of which waiting for input", chunks.input_seconds)
    phases.add("of which summing the output", consumed)

    t0 = time.perf_counter()
    li = lineitem.filter(pc.less_equal(lineitem.column("l_shipdate"), Q1_DATE))
    disc_price = pc.multiply(li.column("l_extendedprice"),
                             pc.subtract(100, li.column("l_discount")))
    li = li.append_column("disc_price", disc_price)
    keys = ["l_returnflag", "l_linestatus"]
    partial = li.group_by(keys).aggregate([("l_quantity", "sum"), ("l_extendedprice", "sum"),
                                           ("disc_price", "sum"), ("l_orderkey", "count")])
    groups = [t for _, t in shuffle(partial, keys, comm, br, partitions=comm.nranks, op_id=5,
                                    batch_rows=batch_rows)]
    phases.add("group-by", time.perf_counter() - t0)
    q1 = []
    for g in groups:
        if g.num_rows == 0:
            continue
        final = g.group_by(keys).aggregate([("l_quantity_sum", "sum"),
                                            ("l_extendedprice_sum", "sum"),
                                            ("disc_price_sum", "sum"),
                                            ("l_orderkey_count", "sum")])
        q1 += [tuple(r.values()) for r in final.to_pylist()]
    peaks = {t: (br.peak(t), br.limit(t)) for t in ("DEVICE", "PINNED_HOST", "HOST", "DISK")
             if br.is_live(t)}
    peaks["shuffled"] = (left.nbytes + partsupp.nbytes, 0)
    return sums, q1, peaks, chunks.plan


def duckdb_results(data: Path):
    import duckdb
    con = duckdb.connect()
    t0 = time.perf_counter()
    join = list(con.execute(JOIN_SQL.format(d=data)).fetchone())
    join_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    q1 = [tuple(r[:2]) + (r[2], r[3], r[4], r[5]) for r in
          con.execute(Q1_SQL.format(d=data)).fetchall()]
    q1_seconds = time.perf_counter() - t0
    # Q1's columns in the order rank_main gives them.
    q1 = [(flag, status, qty, base, disc, count) for flag, status, qty, base, disc, count in q1]
    return join, q1, join_seconds, q1_seconds


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
    p.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument("--ranks", type=int, default=2, help="local ranks (threads; default 2)")
    p.add_argument("--host-limit", default=None,
                   help="each rank's HOST limit: bytes, '4GiB', or 'N%%' of a rank's share of the "
                        "data (its uncompressed size; e.g. 25%%)")
    p.add_argument("--data", default=None, help="where the Parquet files go (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--device-limit", default=None,
                   help="each rank's DEVICE limit, as --host-limit (with --gpu)")
    p.add_argument("--gpu", action="store_true",
                   help="the join on the GPU: each batch copied up as the join asks for it")
    p.add_argument("--no-gpu", action="store_true", help="host tiers only")
    args = p.parse_args(argv)
    if args.ranks < 1 or args.scale <= 0:
        p.error("--ranks and --scale must be positive")
    if args.gpu and args.no_gpu:
        p.error("--gpu and --no-gpu contradict each other")
    if args.gpu and not _spillway.cuda_available():
        p.error("--gpu: no GPU here (or spillway was built without CUDA)")
    tmp = None
    data = Path(args.data) if args.data else Path(tmp := tempfile.mkdtemp(prefix="spillway-tpch-"))
    try:
        t0 = time.perf_counter()
        if not (data / "lineitem" / f"lineitem.{args.ranks}.parquet").exists():
            generate(args.scale, args.ranks, data)
        gen_seconds = time.perf_counter() - t0
        share = data_bytes(data) / args.ranks

        def per_rank(limit):
            return int(share * float(limit[:-1]) / 100) if limit and limit.endswith("%") else limit
        limit, device_limit = per_rank(args.host_limit), per_rank(args.device_limit)
        print(f"tpch: scale {args.scale}, {args.ranks} local ranks, data "
              f"{data_bytes(data) / 2**20:.1f} MiB uncompressed (generated in {gen_seconds:.1f} s), "
              f"host limit per rank {limit if limit is not None else 'none'}, device limit per "
              f"rank {device_limit if device_limit is not None else 'none'}")
        phases = Phases()
        limits = {"use_gpu": not args.no_gpu}
        if limit is not None:
            limits["host_limit"] = limit
        if device_limit is not None:
            limits["device_limit"] = device_limit
        t0 = time.perf_counter()
        # Slices of at most an eighth of the join's tier's limit (rows of ~64 bytes), so that a
        # slice, its partitions and the chunks in flight fit.
        tier = "DEVICE" if args.gpu else "HOST"
        limit_bytes = _spillway.BufferResource(**limits).limit(tier)
        if limit_bytes >= 2**62:  # no limit: slices of 64 Ki rows, 4 Mi on the GPU
            batch_rows = 1 << 22 if args.gpu else 65536
        else:
            batch_rows = max(256, limit_bytes // 8 // 64)
        results = local(args.ranks, rank_main, data, phases, batch_rows, args.gpu, **limits)
        print(f"plan: read each rank's part | join lineitem and partsupp on (partkey, suppkey), "
              f"{results[0][3]} | Q1: partial group-by (pyarrow), shuffle on (returnflag, "
              f"linestatus), final group-by")
        total = time.perf_counter() - t0
        sums = [sum(r[0][i] for r in results) for i in range(5)]
        q1 = sorted(row for r in results for row in r[1])
        want_join, want_q1, duck_join, duck_q1 = duckdb_results(data)
        print("phases (slowest rank): " + " | ".join(
            f"{k} {v:.3f} s" for k, v in phases.slowest.items()) + f" | total {total:.3f} s")
        for r, (_, _, peaks, _) in enumerate(results):
            shuffled = peaks.pop("shuffled")[0]
            print(f"rank {r}: shuffled {shuffled / 2**20:.1f} MiB (the join's columns); peaks: " + ", ".join(
                f"{t} {peak / 2**20:.1f} MiB of "
                f"{'unlimited' if lim >= 2**63 else f'{lim / 2**20:.1f} MiB'}"
                for t, (peak, lim) in peaks.items()))
        print(f"duckdb: join {duck_join:.3f} s, Q1 {duck_q1:.3f} s (same machine, same files)")
        join_ok = sums == [int(x) for x in want_join]
        q1_ok = q1 == [tuple(x) for x in want_q1]
        print(f"join: {sums[0]} rows, checksum {sums[1:]} "
              f"{'== DuckDB' if join_ok else f'!= DuckDB {want_join}'}")
        print(f"Q1: {len(q1)} groups {'== DuckDB' if q1_ok else f'!= DuckDB {want_q1} (got {q1})'}")
        print(f"ratio: spillway shuffle + join / DuckDB's join query "
              f"{phases.slowest['shuffle + join'] / duck_join:.2f} "
              f"({phases.slowest['shuffle + join']:.3f} / {duck_join:.3f} s)")
        return 0 if join_ok and q1_ok else 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
