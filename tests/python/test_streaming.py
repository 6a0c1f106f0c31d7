"""spillway.streaming: networks built and run from Python. A filter and projection as Python
maps give pyarrow's answer; a join then a group-by on 2 ranks, and a sort on 3, as one network
give DuckDB's; a Python actor's exception is what run() raises, with its traceback; a slow
consumer under a small host limit loses nothing; misuse is a UsageError."""

import time
import traceback

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import spillway

duckdb = pytest.importorskip("duckdb")


def facts(rows, seed):
    import random
    rng = random.Random(seed)
    return pa.table({
        "k": pa.array([rng.randrange(50) for _ in range(rows)], pa.int64()),
        "v": pa.array([rng.randrange(-100, 100) for _ in range(rows)], pa.int64()),
        "id": pa.array(range(rows), pa.int64()),
    })


def dims():
    return pa.table({"dk": pa.array(range(50), pa.int64()),
                     "grp": pa.array([f"g{i % 7}" for i in range(50)], pa.string())})


def duck(sql, **tables):
    con = duckdb.connect()
    for name, t in tables.items():
        con.register(name, t)
    return con.sql(sql).to_arrow_table()


def test_python_maps_filter_and_project(br):
    t = facts(5000, 1)
    net = spillway.streaming.Network(br=br)
    rows = net.source(t, batch_rows=300)
    kept = net.map(rows, lambda b: b.filter(pc.greater(b["v"], 0)).select(["id", "v"]),
                   columns=["id", "v"])
    got = net.collect(kept)
    assert "source: - -> source.out" in net.plan()
    report = net.run()
    want = t.filter(pc.greater(t["v"], 0)).select(["id", "v"])
    assert got.table().equals(want)
    names = [a["name"] for a in report.actors]
    assert names == ["source", "map", "collect"]
    assert report.actors[0]["messages_out"] == 17  # 5000 rows in batches of 300
    assert report.actors[1]["rows_out"] == want.num_rows
    assert "map" in report.timeline and report.wall > 0


def test_a_join_then_a_groupby_on_two_ranks_equals_duckdb(tmp_path):
    t = facts(6000, 2)
    d = dims()

    def rank(comm, br):
        n = t.num_rows
        mine = t.slice(comm.rank * n // 2, n // 2)
        net = spillway.streaming.Network(comm, br)
        left = net.source(mine, batch_rows=500)
        right = net.source(d.slice(comm.rank * 25, 25))
        joined = net.join(left, right, ["k"], ["dk"], partitions=4)
        groups = net.groupby(joined, ["grp"], {"v": ["sum", "count"], "id": "max"})
        got = net.collect(groups)
        net.run()
        return got.tables()

    parts = spillway.comm.local(2, rank, use_gpu=False, host_limit="4MiB",
                                spill_dir=str(tmp_path))
    got = pa.concat_tables([p for r in parts for p in r]).sort_by("grp")
    want = duck("SELECT grp, sum(v) AS v_sum, count(v) AS v_count, max(id) AS id_max "
                "FROM t JOIN d ON k = dk GROUP BY grp ORDER BY grp", t=t, d=d)
    assert got.column_names == ["grp", "v_sum", "v_count", "id_max"]
    assert got.to_pylist() == want.to_pylist()


def test_a_sort_on_three_ranks_equals_duckdb(tmp_path):
    t = facts(4000, 3)

    def rank(comm, br):
        n = t.num_rows
        lo, hi = comm.rank * n // 3, (comm.rank + 1) * n // 3
        net = spillway.streaming.Network(comm, br)
        out = net.collect(net.sort(net.source(t.slice(lo, hi - lo)), ["v", "k"],
                                   descending=[True, False], samples=64))
        net.run()
        return out.table()

    got = pa.concat_tables(spillway.comm.local(3, rank, use_gpu=False, spill_dir=str(tmp_path)))
    want = duck("SELECT * FROM t ORDER BY v DESC, k, id", t=t)
    assert got.equals(want)


def test_a_python_actors_exception_is_what_run_raises():
    t = facts(1000, 4)

    def broken(batch):
        if batch["id"][0].as_py() >= 500:
            raise ValueError("bad batch at row 500")
        return batch

    def rank(comm, br):
        net = spillway.streaming.Network(comm, br)
        net.collect(net.shuffle(net.map(net.source(t, batch_rows=100), broken), ["k"]))
        with pytest.raises(ValueError, match="bad batch at row 500") as info:
            net.run()
        assert "broken" in "".join(traceback.format_tb(info.value.__traceback__))

    spillway.comm.local(1, rank, use_gpu=False)


def test_a_slow_consumer_under_a_small_limit_loses_nothing(tmp_path):
    br = spillway.BufferResource(use_gpu=False, host_limit="2MiB", spill_dir=str(tmp_path))
    t = facts(200000, 5)  # 4.6 MiB
    net = spillway.streaming.Network(br=br, max_messages=1000)
    seen = []

    def slow(_, batch):
        if not seen:
            time.sleep(0.3)  # the source runs ahead, its tables wait spillable
        seen.append(batch)

    net.sink(net.source(t, batch_rows=5000), slow)
    net.run()
    assert pa.concat_tables(seen).equals(t)
    assert br.peak("HOST") <= 2 << 20


def test_misuse_is_a_usage_error(br):
    t = facts(10, 6)
    net = spillway.streaming.Network(br=br)
    rows = net.source(t)
    with pytest.raises(spillway.UsageError, match="collective"):
        net.shuffle(rows, ["k"])
    unnamed = net.map(rows, lambda b: b)
    with pytest.raises(spillway.UsageError, match="not one of"):
        net._keys(unnamed, ["nope"], "x")
    net.collect(unnamed)
    net.run()
    with pytest.raises(spillway.UsageError, match="twice"):
        net.run()
    with pytest.raises(spillway.UsageError, match="tier"):
        spillway.streaming.Network(br=br, tier="DISK")
    dangling = spillway.streaming.Network(br=br)
    dangling.source(t)
    with pytest.raises(spillway.UsageError, match="0 consumers"):
        dangling.run()


def test_a_map_on_spillway_tables_through_dlpack(br):
    """arrow=False: the map gets the spillway Table, its columns through DLPack (NumPy here;
    CuPy or PyTorch on the GPU), and returns a spillway Table."""
    np = pytest.importorskip("numpy")
    t = facts(3000, 7)
    net = spillway.streaming.Network(br=br)

    def doubled(table):
        v = np.from_dlpack(table.column("v"))
        return spillway.from_dlpack({"id": np.from_dlpack(table.column("id")).copy(),
                                     "v2": v * 2}, br)

    got = net.collect(net.map(net.source(t, batch_rows=1000), doubled, arrow=False,
                              columns=["id", "v2"]))
    net.run()
    out = got.table()
    assert out.column("id").to_pylist() == t.column("id").to_pylist()
    assert out.column("v2").to_pylist() == [2 * v for v in t.column("v").to_pylist()]


def test_the_networks_channel_bound_holds(br):
    """Network(max_messages=2): a slow sink never sees more than the bound and the message
    that went over it waiting; the source's time blocked on output shows the backpressure."""
    t = facts(20000, 8)
    net = spillway.streaming.Network(br=br, max_messages=2)
    rows = net.source(t, batch_rows=1000)
    most = []

    def slow(_, batch):
        time.sleep(0.005)
        most.append(rows.queued)

    net.sink(rows, slow)
    report = net.run()
    assert len(most) == 20 and 1 <= max(most) <= 3
    assert report.actors[0]["blocked_output"] > 0.02
