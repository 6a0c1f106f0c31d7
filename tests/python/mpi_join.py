"""Run under mpirun by test_mpi.py: each rank joins and groups its slice of the same seeded
tables (test_join.side, test_groupby.data) with spillway.hash_join and spillway.groupby over
MPI, under a 1 MiB host limit with spill injection, and writes what it got as Parquet to
OUT/join_<rank>.parquet and OUT/groupby_<rank>.parquet, and its peak HOST use to
OUT/peak_<rank>.txt; test_mpi.py compares the union with DuckDB."""

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
import spillway  # noqa: E402
from test_groupby import AGGS, data  # noqa: E402
from test_join import side  # noqa: E402


def mine(t, rank, n):
    lo = rank * t.num_rows // n
    return t.slice(lo, (rank + 1) * t.num_rows // n - lo)


def main():
    out, how = Path(sys.argv[1]), sys.argv[2]
    br = spillway.BufferResource(use_gpu=False, host_limit="1MiB", spill_injection=0.3,
                                 spill_dir=str(out))
    comm = spillway.comm.mpi(br)
    comm.timeout = 60
    r, n = comm.rank, comm.nranks
    left, right = side(3000, 3, "a"), side(2000, 4, "b")
    parts = [t for _, t in spillway.hash_join(mine(left, r, n), mine(right, r, n), ["k", "s"],
                                              comm, br, how=how, partitions=8)]
    pq.write_table(pa.concat_tables(parts) if parts else side(0, 0, "a"), out / f"join_{r}.parquet")
    groups = [t for _, t in spillway.groupby(mine(data(9000, 2), r, n), ["k", "s"], AGGS,
                                             comm, br, partitions=5, batch_rows=1000, op_id=7)]
    if groups:
        pq.write_table(pa.concat_tables(groups), out / f"groupby_{r}.parquet")
    (out / f"peak_{r}.txt").write_text(str(br.peak("HOST")))
    comm.barrier()
    del comm  # before the resource it uses
    return 0


if __name__ == "__main__":
    sys.exit(main())
