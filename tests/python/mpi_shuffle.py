"""Run under mpirun (or spillway-run) by test_mpi.py: each rank shuffles its rows over MPI and
prints its rows' count, the sum of its keys and whether each key is in one partition."""

import sys

import pyarrow as pa
import pyarrow.compute as pc

import spillway


def main():
    br = spillway.BufferResource(use_gpu=False, host_limit="256MiB")
    comm = spillway.comm.mpi(br)
    comm.timeout = 60
    keys = [(comm.rank * 104729 + i * 17) % 1000 for i in range(5000)]
    data = pa.table({"key": pa.array(keys, pa.int64()), "rank": [comm.rank] * len(keys)})
    rows = 0
    key_sum = 0
    for _, part in spillway.shuffle(data, ["key"], comm, br, partitions=5):
        rows += part.num_rows
        key_sum += pc.sum(part.column("key")).as_py() or 0
    print(f"rank {comm.rank} of {comm.nranks}: rows {rows} key_sum {key_sum}", flush=True)
    comm.barrier()
    del comm  # before the resource it uses
    return 0


if __name__ == "__main__":
    sys.exit(main())
