"""spillway.join and spillway.hash_join against DuckDB running the same SQL on the same data:
every join type, several keys with nulls, duplicates and strings, on 1-3 local ranks, with a
host limit that makes the shuffle spill; compared as multisets of rows."""

import datetime
import decimal
import random
import threading
import time

import pyarrow as pa
import pytest

import spillway

duckdb = pytest.importorskip("duckdb")

SQL_JOIN = {"inner": "JOIN", "left": "LEFT JOIN", "full": "FULL OUTER JOIN",
            "left_semi": "SEMI JOIN", "left_anti": "ANTI JOIN"}


def side(rows, seed, tag):
    rng = random.Random(seed)
    def maybe(v):
        return None if rng.random() < 0.05 else v
    return pa.table({
        "k": pa.array([maybe(rng.randrange(60)) for _ in range(rows)], pa.int64()),
        "s": pa.array([maybe(f"s{rng.randrange(4)}") for _ in range(rows)], pa.string()),
        f"{tag}_v": pa.array([rng.random() for _ in range(rows)], pa.float64()),
        f"{tag}_n": pa.array([rng.randrange(1000) for _ in range(rows)], pa.int32()),
        # Keys of the types real data has: decimals (some beyond 64 bits), dates, timestamps.
        "d": pa.array([maybe(decimal.Decimal(rng.randrange(-30, 30)).scaleb(-2) * 10**20)
                       for _ in range(rows)], pa.decimal128(25, 2)),
        "day": pa.array([maybe(datetime.date(2024, 1, 1 + rng.randrange(20))) for _ in range(rows)],
                        pa.date32()),
        "ts": pa.array([maybe(datetime.datetime(2024, 1, 1, rng.randrange(24))) for _ in range(rows)],
                       pa.timestamp("us")),
    })


def rows(t):
    """A sorted list of row tuples (None first), names dropped: a multiset to compare."""
    cols = [t.column(i).to_pylist() for i in range(t.num_columns)]
    return sorted(zip(*cols), key=lambda r: [(v is not None, v) for v in r])


def duck(left, right, keys, how):
    con = duckdb.connect()
    con.register("l", left)
    con.register("r", right)
    cond = " AND ".join(f"l.{k} = r.{k}" for k in keys)
    sel = "l.*" if how in ("left_semi", "left_anti") else "l.*, r.*"
    return con.sql(f"SELECT {sel} FROM l {SQL_JOIN[how]} r ON {cond}").to_arrow_table()


@pytest.mark.parametrize("how", list(SQL_JOIN))
@pytest.mark.parametrize("keys", [["k"], ["s"], ["k", "s"], ["d"], ["day", "k"], ["ts"]])
def test_join_equals_duckdb(br, how, keys):
    left, right = side(700, 1, "a"), side(400, 2, "b")
    got = spillway.join(left, right, keys, br, how=how)
    want = duck(left, right, keys, how)
    assert got.num_rows == want.num_rows
    assert rows(got) == rows(want)


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
@pytest.mark.parametrize("how", ["inner", "left", "full", "left_anti"])
def test_hash_join_on_local_ranks_equals_duckdb(tmp_path, nranks, how):
    left, right = side(3000, 3, "a"), side(2000, 4, "b")

    def rank(comm, br):
        # Each rank gives its slice of both sides; the partitions come back joined.
        lo = lambda t: t.slice(comm.rank * t.num_rows // nranks,
                               (comm.rank + 1) * t.num_rows // nranks - comm.rank * t.num_rows // nranks)
        parts = list(spillway.hash_join(lo(left), lo(right), ["k", "s"], comm, br, how=how,
                                        partitions=8))
        return [t for _, t in parts], br.peak("HOST")

    # Half a MiB per rank: the shuffle spills to disk.
    results = spillway.comm.local(nranks, rank, use_gpu=False, host_limit="1MiB",
                                  spill_dir=str(tmp_path))
    got = pa.concat_tables([t for tables, _ in results for t in tables])
    want = duck(left, right, ["k", "s"], how)
    assert got.num_rows == want.num_rows
    assert rows(got) == rows(want)
    assert all(peak <= 1 << 20 for _, peak in results)


def test_hash_join_in_chunks_reports_its_plan_and_stops_when_its_consumer_does():
    left, right = side(3000, 9, "a"), side(2000, 10, "b")
    want = duck(left, right, ["k"], "inner")

    def rank(comm, br):
        # Output chunks of at most 16 KiB: more than one, all of the join.
        chunks = spillway.hash_join(left, right, ["k"], comm, br, chunk_bytes=16 << 10,
                                    partitions=3)
        got = [t for _, t in chunks]
        assert len(got) > 3
        assert "shuffle join: both sides hashed into 3 partitions" in chunks.plan
        assert rows(pa.concat_tables(got)) == rows(want)
        # A small right side whose size is given: the broadcast plan.
        chunks = spillway.hash_join(left, right, ["k"], comm, br, op_id=10,
                                    right_bytes=right.nbytes)
        assert sum(t.num_rows for _, t in chunks) == want.num_rows
        assert chunks.plan.startswith("broadcast join")
        # A consumer that stops after one chunk: the join ends, nothing hangs.
        chunks = spillway.hash_join(left, right, ["k"], comm, br, chunk_bytes=16 << 10,
                                    op_id=20)
        next(chunks)
        chunks.close()
        assert chunks.plan is None
        assert list(chunks) == []
        # One that drops the iterator without closing it: the same.
        chunks = spillway.hash_join(left, right, ["k"], comm, br, chunk_bytes=16 << 10,
                                    op_id=25)
        next(chunks)
        thread = chunks._thread
        del chunks
        thread.join(timeout=30)
        assert not thread.is_alive()
        # ... and the threads that made its sides' batches one ahead end with it.
        deadline = time.monotonic() + 30
        while any(t.name == "spillway-ahead" for t in threading.enumerate()):
            assert time.monotonic() < deadline, "a side's thread outlived its join"
            time.sleep(0.05)

        # An error inside the join (a source that fails) is raised to the consumer.
        def failing():
            yield left.slice(0, 10)
            raise RuntimeError("the source broke")
        with pytest.raises(RuntimeError, match="the source broke"):
            list(spillway.hash_join(failing(), right, ["k"], comm, br, op_id=30))
        with pytest.raises(spillway.UsageError, match="not one of"):
            spillway.hash_join(left, right, ["nope"], comm, br)
        with pytest.raises(spillway.UsageError, match="how="):
            spillway.hash_join(left, right, ["k"], comm, br, how="outer")
        with pytest.raises(spillway.UsageError, match="hash_join: an input gave no table"):
            spillway.hash_join([], right, ["k"], comm, br)
        with pytest.raises(spillway.UsageError, match="int64 on the left and string"):
            list(spillway.hash_join(left, right, ["k"], comm, br, right_on=["s"], op_id=40))

    spillway.comm.local(1, rank, use_gpu=False)


def test_join_errors_are_usage_errors(br):
    left, right = side(10, 5, "a"), side(10, 6, "b")
    with pytest.raises(spillway.UsageError, match="how="):
        spillway.join(left, right, ["k"], br, how="outer")
    with pytest.raises(spillway.UsageError, match="int64 on the left and string"):
        spillway.join(left, right, ["k"], br, right_on=["s"])
    with pytest.raises(spillway.UsageError, match="not one of"):
        spillway.join(left, right, ["nope"], br)


def test_joins_of_empty_tables(br):
    left, right = side(50, 7, "a"), side(0, 8, "b")
    assert spillway.join(left, right, ["k"], br).num_rows == 0
    assert spillway.join(left, right, ["k"], br, how="left").num_rows == 50
    assert spillway.join(right, left, ["k"], br, how="full").num_rows == 50
