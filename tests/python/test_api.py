"""The operators' one argument order (inputs, keys, aggregations, then comm and br), the tiers
as an enum, the settings set by name, and ranks over transfer engines."""

import pyarrow as pa
import pytest

import spillway


def small():
    return pa.table({"k": [1, 2, 2, 3], "v": [10, 20, 30, 40]})


def test_local_operators_take_comm_none_and_br_by_position_or_keyword():
    br = spillway.BufferResource(use_gpu=False)
    t = small()
    by_keyword = spillway.groupby(t, ["k"], {"v": "sum"}, br=br).sort_by("k")
    by_position = spillway.groupby(t, ["k"], {"v": "sum"}, None, br).sort_by("k")
    old_order = spillway.groupby(t, ["k"], {"v": "sum"}, br).sort_by("k")
    assert by_keyword.column("v_sum").to_pylist() == [10, 50, 40]
    assert by_position.equals(by_keyword) and old_order.equals(by_keyword)
    assert spillway.join(t, t, ["k"], br=br).num_rows == spillway.join(t, t, ["k"], None, br).num_rows == 6


def test_distributed_operators_take_comm_then_br():
    def rank(comm, br):
        mine = small().slice(comm.rank * 2, 2)
        rows = sum(p.num_rows for _, p in spillway.shuffle(mine, ["k"], comm, br))
        groups = sum(p.num_rows for _, p in spillway.groupby(mine, ["k"], {"v": "sum"}, comm, br))
        joined = sum(p.num_rows for _, p in spillway.hash_join(mine, mine, ["k"], comm=comm, br=br))
        return rows, groups, joined
    results = spillway.comm.local(2, rank, use_gpu=False)
    assert sum(r[0] for r in results) == 4
    assert sum(r[1] for r in results) == 3
    assert sum(r[2] for r in results) == 6  # the whole table joined with itself: 1 + 4 + 1


def test_missing_or_wrong_comm_and_br_are_errors_that_name_them():
    br = spillway.BufferResource(use_gpu=False)
    with pytest.raises(spillway.UsageError, match="shuffle: comm .* is required"):
        list(spillway.shuffle(small(), ["k"], br=br))
    with pytest.raises(spillway.UsageError, match="groupby: br .* is required"):
        spillway.groupby(small(), ["k"], {"v": "sum"})
    with pytest.raises(spillway.UsageError, match="hash_join: br=.*not a spillway.BufferResource"):
        spillway.hash_join(small(), small(), ["k"], None, "br")
    with pytest.raises(spillway.UsageError, match="join is local"):
        def rank(comm, br):
            spillway.join(small(), small(), ["k"], comm, br)
        spillway.comm.local(1, rank, use_gpu=False)


def test_tiers_are_an_enum_and_strings_still_work():
    br = spillway.BufferResource(use_gpu=False, host_limit="64MiB")
    assert spillway.Tier.HOST == "HOST" and str(spillway.Tier.DISK) == "DISK"
    assert br.limit(spillway.Tier.HOST) == br.limit("HOST") == 64 << 20
    t = spillway.from_arrow(small(), br)
    assert t.copy(spillway.Tier.HOST).num_rows == 4
    assert [b.num_rows for b in spillway.tables.batches(small(), br, spillway.Tier.HOST)] == [4]
    with pytest.raises(spillway.UsageError, match="tier 'GPU'.*DEVICE, PINNED_HOST, HOST, DISK"):
        list(spillway.tables.batches(small(), br, "GPU"))


def test_settings_are_read_and_set_by_name():
    before = spillway.setting("memory_wait_ms")
    try:
        spillway.set_setting("memory_wait_ms", 250)
        assert spillway.setting("SPILLWAY_MEMORY_WAIT_MS") == "250"
        assert spillway.settings()["SPILLWAY_MEMORY_WAIT_MS"] == "250"
        with pytest.raises(spillway.UsageError, match="SPILLWAY_MEMORY_WAIT_MS"):
            spillway.set_setting("memory_wait_ms", "soon")
        assert spillway.setting("memory_wait_ms") == "250"
        with pytest.raises(spillway.UsageError, match="SPILLWAY_NO_SUCH"):
            spillway.set_setting("no_such", 1)
    finally:
        spillway.set_setting("memory_wait_ms", before)


def test_ranks_over_transfer_engines_shuffle_like_local_ones():
    def rank(comm, br):
        mine = pa.table({"key": list(range(comm.rank, 1000, 2))})
        parts = list(spillway.shuffle(mine, ["key"], comm, br, partitions=4))
        return comm.kind, sorted(k for _, p in parts for k in p.column("key").to_pylist())
    results = spillway.comm.local(2, rank, transport="transfer", use_gpu=False)
    assert {kind for kind, _ in results} == {"transfer"}
    assert sorted(k for _, keys in results for k in keys) == list(range(1000))


def test_transfer_outside_spillway_run_and_an_unknown_transport_are_errors():
    br = spillway.BufferResource(use_gpu=False)
    with pytest.raises(spillway.UsageError, match="spillway-run"):
        spillway.comm.transfer(br)
    with pytest.raises(spillway.UsageError, match="transport='mpi'"):
        spillway.comm.local(2, lambda comm, br: None, transport="mpi")
