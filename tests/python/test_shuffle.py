"""The shuffle from Python on local ranks: every row arrives once, each key in one
partition, also with spilling forced; a rank that raises makes its peers fail, not hang."""

import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import spillway


def rank_input(rank, rows=2000):
    keys = [(rank * 7919 + i * 31) % 500 for i in range(rows)]
    return pa.table({"key": pa.array(keys, pa.int64()),
                     "rank": pa.array([rank] * rows, pa.int32()),
                     "name": pa.array([f"r{rank}-{i}" for i in range(rows)])})


def run(nranks, partitions=None, **limits):
    def rank(comm, br):
        return list(spillway.shuffle(rank_input(comm.rank), ["key"], comm, br,
                                     partitions=partitions))
    return spillway.comm.local(nranks, rank, use_gpu=False, **limits)


def check(results, nranks, partitions):
    got = pa.concat_tables([t for parts in results for _, t in parts])
    want = pa.concat_tables([rank_input(r) for r in range(nranks)])
    # Every row once: the same multiset of (key, rank, name) as pyarrow's group-by counts.
    count = lambda t: sorted(t.group_by(["key", "rank"]).aggregate([("name", "count")]).to_pylist(),
                             key=lambda d: (d["key"], d["rank"]))
    assert count(got) == count(want)
    assert sorted(got.column("name").to_pylist()) == sorted(want.column("name").to_pylist())
    # Each partition on one rank, each key in one partition.
    pids = [pid for parts in results for pid, _ in parts]
    assert sorted(pids) == list(range(partitions))
    owner = {}
    for parts in results:
        for pid, t in parts:
            for k in pc.unique(t.column("key")).to_pylist():
                assert owner.setdefault(k, pid) == pid


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_every_row_arrives_once(nranks):
    check(run(nranks), nranks, nranks)


def test_more_partitions_than_ranks():
    check(run(3, partitions=8), 3, 8)


def test_spilling_forced(tmp_path):
    check(run(3, host_limit="8MiB", spill_injection=0.5, spill_dir=str(tmp_path)), 3, 3)


def test_a_rank_that_raises_fails_its_peers_within_the_timeout():
    def rank(comm, br):
        if comm.rank == 1:
            raise KeyError("rank 1 failed before it shuffled")
        return list(spillway.shuffle(rank_input(comm.rank), ["key"], comm, br))

    start = time.monotonic()
    with pytest.raises(KeyError, match="rank 1 failed"):
        spillway.comm.local(2, rank, timeout=30, use_gpu=False)
    assert time.monotonic() - start < 20


def test_bad_keys_are_usage_errors():
    def rank(comm, br):
        return list(spillway.shuffle(rank_input(comm.rank), ["nope"], comm, br))

    with pytest.raises(spillway.UsageError, match="nope"):
        spillway.comm.local(1, rank, use_gpu=False)


def test_progress_shows_each_ranks_bytes_and_partitions(capfd):
    pytest.importorskip("tqdm")

    def rank(comm, br):
        parts = list(spillway.shuffle(rank_input(comm.rank), ["key"], comm, br, partitions=4,
                                      progress=True))
        return len(parts), br.statistics().get("shuffle-payload-recv", {}).get("bytes", 0)

    results = spillway.comm.local(2, rank, use_gpu=False)
    err = capfd.readouterr().err
    assert sum(n for n, _ in results) == 4
    for r, (n, received) in enumerate(results):
        assert received > 0
        assert f"rank {r}/2 shuffle" in err, err
        assert f"partitions {n}/{n}" in err, err


def test_progress_without_tqdm_is_a_usage_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)

    def rank(comm, br):
        return list(spillway.shuffle(rank_input(comm.rank), ["key"], comm, br, progress=True))

    with pytest.raises(spillway.UsageError, match="needs tqdm"):
        spillway.comm.local(1, rank, use_gpu=False)
