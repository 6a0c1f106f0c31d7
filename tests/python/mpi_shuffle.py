"""Run under mpirun (or spillway-run) by test_mpi.py: each rank shuffles its rows over MPI
(with --mpi4py over an mpi4py communicator of the world's ranks reversed) and prints its
rows' count and the sum of its keys."""

import sys

import pyarrow as pa
import pyarrow.compute as pc

import spillway


def main():
    br = spillway.BufferResource(use_gpu=False, host_limit="256MiB")
    if "--mpi4py" in sys.argv:
        # The world's ranks in reverse order: spillway's ranks must be this communicator's.
        from mpi4py import MPI
        world = MPI.COMM_WORLD
        reversed_world = world.Split(0, world.size - 1 - world.rank)
        comm = spillway.comm.mpi(br, reversed_world)
        assert comm.rank == world.size - 1 - world.rank, (comm.rank, world.rank)
        assert comm.nranks == world.size
    else:
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
