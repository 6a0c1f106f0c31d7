"""spillway.sort against DuckDB's ORDER BY and pyarrow's sort on the same data: int, float and
string keys with nulls and duplicates, ascending and descending, nulls first and last, several
keys, top-k; in one process and on 1-4 local ranks (a rank without rows too) under a host limit.
The sort is stable, so ties are ordered by a unique id in input order, which DuckDB is told."""

import math
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import spillway

duckdb = pytest.importorskip("duckdb")


def data(rows, seed):
    rng = random.Random(seed)

    def maybe(v):
        return None if rng.random() < 0.08 else v
    return pa.table({
        "k": pa.array([maybe(rng.randrange(30)) for _ in range(rows)], pa.int64()),
        "f": pa.array([maybe(rng.choice([rng.random(), -0.0, 0.0, math.inf, -1.5]))
                       for _ in range(rows)], pa.float64()),
        "s": pa.array([maybe(f"s{rng.randrange(12)}") for _ in range(rows)], pa.string()),
        "id": pa.array(range(rows), pa.int64()),
    })


def duck(t, order, limit=None):
    sql = f"SELECT * FROM t ORDER BY {order}, id" + (f" LIMIT {limit}" if limit is not None else "")
    con = duckdb.connect()
    con.register("t", t)
    return con.sql(sql).to_arrow_table()


def ids(t):
    return t.column("id").to_pylist()


CASES = [  # (by, descending, nulls_first, SQL)
    (["k"], False, False, "k ASC NULLS LAST"),
    (["k"], True, True, "k DESC NULLS FIRST"),
    (["s", "f"], [False, True], [True, False], "s ASC NULLS FIRST, f DESC NULLS LAST"),
    (["f"], False, False, "f ASC NULLS LAST"),
]


@pytest.mark.parametrize("by,descending,nulls_first,sql", CASES)
def test_sort_equals_duckdb(br, by, descending, nulls_first, sql):
    t = data(5000, 1)
    got = spillway.sort(t, by, br=br, descending=descending, nulls_first=nulls_first)
    assert got.num_rows == t.num_rows
    assert ids(got) == ids(duck(t, sql))
    assert got.equals(duck(t, sql))


def test_sort_equals_pyarrow(br):
    t = data(3000, 2)
    got = spillway.sort(t, ["s", "k"], br=br, descending=[True, False])
    want = t.take(pc.sort_indices(
        t, sort_keys=[("s", "descending"), ("k", "ascending"), ("id", "ascending")]))  # nulls at the end
    assert ids(got) == ids(want)


def test_top_k(br):
    t = data(4000, 3)
    got = spillway.sort(t, ["k", "s"], br=br, descending=True, limit=25)
    assert ids(got) == ids(duck(t, "k DESC NULLS LAST, s DESC NULLS LAST", 25))
    assert spillway.sort(t, "k", br=br, limit=0).num_rows == 0


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_distributed_sort_equals_duckdb(tmp_path, nranks):
    t = data(8000, 4)
    empty = 1 if nranks > 2 else None

    def rank(comm, br):
        n = t.num_rows
        lo, hi = comm.rank * n // nranks, (comm.rank + 1) * n // nranks
        mine = t.slice(0, 0) if comm.rank == empty else t.slice(lo, hi - lo)
        return spillway.sort(mine, ["s", "k"], comm, br, descending=[False, True],
                             batch_rows=700, samples=50)

    parts = spillway.comm.local(nranks, rank, use_gpu=False, host_limit="2MiB",
                                spill_dir=str(tmp_path))
    got = pa.concat_tables(parts)
    if empty is not None:
        lo, hi = empty * t.num_rows // nranks, (empty + 1) * t.num_rows // nranks
        t = pa.concat_tables([t.slice(0, lo), t.slice(hi)])
    assert ids(got) == ids(duck(t, "s ASC NULLS LAST, k DESC NULLS LAST"))


def test_distributed_top_k_is_on_rank_zero(tmp_path):
    t = data(3000, 5)

    def rank(comm, br):
        n = t.num_rows
        mine = t.slice(comm.rank * n // 2, n // 2)
        return spillway.sort(mine, "f", comm, br, limit=40)

    parts = spillway.comm.local(2, rank, use_gpu=False, spill_dir=str(tmp_path))
    assert parts[1].num_rows == 0
    assert ids(parts[0]) == ids(duck(t, "f ASC NULLS LAST", 40))


def test_sort_errors_are_usage_errors(br):
    t = data(10, 6)
    with pytest.raises(spillway.UsageError, match="not one of"):
        spillway.sort(t, ["nope"], br=br)
    with pytest.raises(spillway.UsageError, match="no keys"):
        spillway.sort(t, [], br=br)
    with pytest.raises(spillway.UsageError, match="descending has 1 entries for 2 keys"):
        spillway.sort(t, ["k", "s"], br=br, descending=[True])
    with pytest.raises(spillway.UsageError, match="limit"):
        spillway.sort(t, "k", br=br, limit=-1)
