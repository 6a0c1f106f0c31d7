"""spillway.groupby against DuckDB's GROUP BY on the same data: count, sum, min, max and mean
of int and float columns with nulls, int and string keys with null keys, in one process and on
1-3 local ranks (pre-aggregation, shuffle of the partials, final aggregation) under a host limit."""

import datetime
import decimal
import random

import pyarrow as pa
import pytest

import spillway

duckdb = pytest.importorskip("duckdb")


def data(rows, seed):
    rng = random.Random(seed)
    def maybe(v):
        return None if rng.random() < 0.05 else v
    return pa.table({
        "k": pa.array([maybe(rng.randrange(40)) for _ in range(rows)], pa.int64()),
        "s": pa.array([maybe(f"s{rng.randrange(3)}") for _ in range(rows)], pa.string()),
        "i": pa.array([maybe(rng.randrange(-1000, 1000)) for _ in range(rows)], pa.int32()),
        "f": pa.array([maybe(rng.random()) for _ in range(rows)], pa.float64()),
        "dec": pa.array([maybe(decimal.Decimal(rng.randrange(-10**6, 10**6)).scaleb(-2))
                         for _ in range(rows)], pa.decimal128(18, 2)),
        "day": pa.array([maybe(datetime.date(2020, 1, 1) + datetime.timedelta(rng.randrange(900)))
                         for _ in range(rows)], pa.date32()),
        "ts": pa.array([maybe(datetime.datetime(2024, 3, 1) + datetime.timedelta(seconds=rng.randrange(10**6)))
                        for _ in range(rows)], pa.timestamp("ms")),
    })


AGGS = {"i": ["count", "sum", "min", "max", "mean"], "f": ["sum", "max", "mean"],
        "dec": ["sum", "min", "max", "mean"], "day": ["min", "max"], "ts": ["count", "max"]}
SQL = ("SELECT k, s, count(i), CAST(sum(i) AS BIGINT), min(i), max(i), avg(i), sum(f), max(f), "
       "avg(f), sum(dec), min(dec), max(dec), avg(dec), min(day), max(day), count(ts), max(ts) "
       "FROM t GROUP BY k, s")


def rows(t):
    """Sorted row tuples; floats as pytest.approx (sums in another order, or a decimal's mean
    divided in another order, differ in the last bits), sorted by the other values."""
    cols = [t.column(c).to_pylist() for c in range(t.num_columns)]
    exact = lambda r: [(v is not None, v) for v in r if not isinstance(v, float)]
    return [tuple(pytest.approx(v, rel=1e-12, abs=1e-12) if isinstance(v, float) else v for v in r)
            for r in sorted(zip(*cols), key=exact)]


def duck(t):
    con = duckdb.connect()
    con.register("t", t)
    return con.sql(SQL).to_arrow_table()


def test_groupby_equals_duckdb(br):
    t = data(5000, 1)
    got = spillway.groupby(t, ["k", "s"], AGGS, br)
    assert got.column_names == ["k", "s", "i_count", "i_sum", "i_min", "i_max", "i_mean",
                                "f_sum", "f_max", "f_mean", "dec_sum", "dec_min", "dec_max",
                                "dec_mean", "day_min", "day_max", "ts_count", "ts_max"]
    assert got.schema.field("dec_sum").type == pa.decimal128(38, 2)
    assert got.schema.field("day_min").type == pa.date32()
    assert rows(got) == rows(duck(t))


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_distributed_groupby_equals_duckdb(tmp_path, nranks):
    t = data(9000, 2)

    def rank(comm, br):
        n = t.num_rows
        mine = t.slice(comm.rank * n // nranks, (comm.rank + 1) * n // nranks - comm.rank * n // nranks)
        return [part for _, part in spillway.groupby(mine, ["k", "s"], AGGS, comm, br,
                                                      partitions=5, batch_rows=1000)]

    results = spillway.comm.local(nranks, rank, use_gpu=False, host_limit="1MiB",
                                  spill_dir=str(tmp_path))
    got = pa.concat_tables([p for parts in results for p in parts])
    assert rows(got) == rows(duck(t))  # each group once, on one rank


def test_groupby_errors_are_usage_errors(br):
    t = data(10, 3)
    with pytest.raises(spillway.UsageError, match="median"):
        spillway.groupby(t, ["k"], {"i": "median"}, br)
    with pytest.raises(spillway.UsageError, match="sum of a string"):
        spillway.groupby(t, ["k"], {"s": "sum"}, br)
    with pytest.raises(spillway.UsageError, match="mean of a date32"):
        spillway.groupby(t, ["k"], {"day": "mean"}, br)
    with pytest.raises(spillway.UsageError, match="not one of"):
        spillway.groupby(t, ["nope"], {"i": "sum"}, br)
    with pytest.raises(spillway.UsageError, match="no aggregations"):
        spillway.groupby(t, ["k"], {}, br)


def test_a_distributed_groupby_of_no_table_names_itself():
    def rank(comm, br):
        with pytest.raises(spillway.UsageError, match="groupby: an input gave no table"):
            list(spillway.groupby([], ["k"], {"i": "sum"}, comm, br))
    spillway.comm.local(1, rank, use_gpu=False)
