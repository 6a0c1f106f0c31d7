"""spillway.ray.world: Ray actors (a local Ray cluster) form one communicator over MPI; the
shuffle between them loses and duplicates no row, and a rank that raises is the error raised,
its peer failing with CommError instead of hanging."""

import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import spillway

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.skipif(
    not spillway._spillway.mpi_is_compiled() or shutil.which("ompi-server") is None,
    reason="spillway built without MPI, or no ompi-server")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # (OpenMPI refuses root without these; Ray's workers inherit them from ray.init.)
    saved = dict(os.environ)
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    os.environ.clear()
    os.environ.update(saved)


def rank_input(rank):
    return pa.table({"key": pa.array([(rank * 7919 + i * 31) % 500 for i in range(3000)],
                                     pa.int64()),
                     "rank": pa.array([rank] * 3000, pa.int32())})


def test_two_actors_shuffle_every_row_once():
    def rank(comm, br):
        assert comm.kind == "mpi"
        parts = list(spillway.shuffle(rank_input(comm.rank), ["key"], comm, br, partitions=6))
        return comm.rank, comm.nranks, [(pid, t) for pid, t in parts]

    results = spillway.ray.world(2, rank, use_gpu=False, host_limit="256MiB", timeout=60)
    assert [(r, n) for r, n, _ in results] == [(0, 2), (1, 2)]
    got = pa.concat_tables([t for _, _, parts in results for _, t in parts if t.num_columns])
    want = pa.concat_tables([rank_input(r) for r in range(2)])
    count = lambda t: sorted(t.group_by(["key", "rank"]).aggregate([("rank", "count")])
                             .to_pylist(), key=lambda d: (d["key"], d["rank"]))
    assert count(got) == count(want)
    assert sorted(pid for _, _, parts in results for pid, _ in parts) == list(range(6))
    assert pc.sum(got.column("key")).as_py() == pc.sum(want.column("key")).as_py()


def test_a_rank_that_raises_is_the_error_and_its_peer_does_not_hang():
    def rank(comm, br):
        if comm.rank == 1:
            raise ValueError("rank 1 gives up")
        comm.barrier()  # rank 1 never comes: a CommError within the timeout
        return "no"

    with pytest.raises(ValueError, match="rank 1 gives up"):
        spillway.ray.world(2, rank, use_gpu=False, timeout=5)


def test_bad_arguments_are_usage_errors():
    with pytest.raises(spillway.UsageError, match="at least 1"):
        spillway.ray.world(0, lambda comm, br: None)
