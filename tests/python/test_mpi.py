"""The shuffle from Python over MPI: mpirun -np 2 on this machine (skipped without mpirun or
an MPI build); what the ranks received adds up to what they sent."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spillway


@pytest.mark.skipif(shutil.which("mpirun") is None or not spillway._spillway.mpi_is_compiled(),
                    reason="no mpirun, or spillway built without MPI")
@pytest.mark.parametrize("how", ["world", "mpi4py"])
def test_two_mpi_ranks_shuffle_every_row_once(how):
    if how == "mpi4py":
        pytest.importorskip("mpi4py")
    script = Path(__file__).with_name("mpi_shuffle.py")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, str(script)]
                         + (["--mpi4py"] if how == "mpi4py" else []),
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.findall(r"rank (\d) of 2: rows (\d+) key_sum (\d+)", out.stdout)
    assert len(found) == 2, out.stdout
    rows = sum(int(r) for _, r, _ in found)
    key_sum = sum(int(k) for _, _, k in found)
    want = [(r * 104729 + i * 17) % 1000 for r in range(2) for i in range(5000)]
    assert rows == len(want)
    assert key_sum == sum(want)


@pytest.mark.skipif(not spillway._spillway.mpi_is_compiled(), reason="spillway built without MPI")
def test_a_communicator_that_is_not_mpi4pys_is_a_usage_error():
    pytest.importorskip("mpi4py")
    br = spillway.BufferResource(use_gpu=False)
    for bad in (42, "world", object()):
        with pytest.raises(spillway.UsageError, match="not an mpi4py intracommunicator"):
            spillway.comm.mpi(br, bad)


@pytest.mark.skipif(shutil.which("mpirun") is None or not spillway._spillway.mpi_is_compiled(),
                    reason="no mpirun, or spillway built without MPI")
@pytest.mark.parametrize("np_,how", [(2, "inner"), (3, "full"), (3, "left_anti")])
def test_join_and_groupby_over_mpi_equal_duckdb(tmp_path, np_, how):
    """2 and 3 MPI processes under a 1 MiB host limit with spill injection: the union of the
    ranks' join and group-by output equals DuckDB's on the same data, and no rank passed the
    limit."""
    pytest.importorskip("duckdb")
    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_groupby import data, duck as duck_groupby, rows as group_rows
    from test_join import duck as duck_join, rows as join_rows, side

    script = Path(__file__).with_name("mpi_join.py")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run(["mpirun", "-np", str(np_), "--bind-to", "none", sys.executable,
                          str(script), str(tmp_path), how],
                         env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    got = pa.concat_tables([pq.read_table(tmp_path / f"join_{r}.parquet") for r in range(np_)])
    want = duck_join(side(3000, 3, "a"), side(2000, 4, "b"), ["k", "s"], how)
    assert got.num_rows == want.num_rows
    assert join_rows(got) == join_rows(want)
    groups = pa.concat_tables([pq.read_table(p) for p in sorted(tmp_path.glob("groupby_*.parquet"))])
    assert group_rows(groups) == group_rows(duck_groupby(data(9000, 2)))
    assert all(int((tmp_path / f"peak_{r}.txt").read_text()) <= 1 << 20 for r in range(np_))
    assert not list(tmp_path.glob("*/*")), "spill files outlived the ranks"
