"""Tables through the Arrow PyCapsule interface: every column type, with nulls, sliced,
empty, as a table, a record batch or a stream, from pyarrow and Polars; and through spillway's
pack format (what the shuffle moves)."""

import decimal

import pyarrow as pa
import pytest

import spillway

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
         pa.uint64(), pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.date32(),
         pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us"), pa.timestamp("ns"),
         pa.decimal128(12, 2), pa.decimal128(38, 10)]


def sample(n=37, nulls=True):
    cols = {}
    for t in TYPES:
        if t == pa.string():
            values = [("s" * (i % 5)) + str(i) for i in range(n)]
        elif t == pa.bool_():
            values = [i % 3 == 0 for i in range(n)]
        elif pa.types.is_floating(t):
            values = [i * 0.5 for i in range(n)]
        elif pa.types.is_decimal(t):  # negative ones, and ones that need more than 64 bits
            values = [decimal.Decimal(i - 20).scaleb(-t.scale) * (10 ** (t.precision - 4) if i % 5 == 0 else 1)
                      for i in range(n)]
        else:
            values = [i % 100 for i in range(n)]
        if nulls:
            values = [None if i % 7 == 3 else v for i, v in enumerate(values)]
        cols[str(t)] = pa.array(values, type=t)
    return pa.table(cols)


@pytest.mark.parametrize("nulls", [False, True])
def test_every_type_round_trips(br, nulls):
    t = sample(nulls=nulls)
    back = spillway.to_arrow(spillway.from_arrow(t, br))
    assert back.equals(t)


def test_sliced_and_empty_tables(br):
    t = sample(100)
    assert spillway.to_arrow(spillway.from_arrow(t.slice(13, 50), br)).equals(t.slice(13, 50))
    empty = t.slice(0, 0)
    assert spillway.to_arrow(spillway.from_arrow(empty, br)).equals(empty)


@pytest.mark.parametrize("tier", ["HOST", "PINNED_HOST", "DEVICE"])
def test_batches_go_straight_into_a_tier(tmp_path, tier):
    br = spillway.BufferResource(spill_dir=str(tmp_path))
    if not br.is_live(tier):
        pytest.skip(f"no {tier} tier here")
    # Sliced, empty, and columns of more than 4 MiB (a staged copy to the GPU).
    n = 700_000
    big = pa.table({"i": pa.array(range(n), type=pa.int64()),
                    "s": pa.array([None if i % 11 == 0 else str(i) for i in range(n)])})
    # And chunks gathered into one table: one copy of several Arrow batches.
    chunked = pa.concat_tables([big.slice(3, 300_001), big.slice(300_004), sample(5).select([])
                                .append_column("i", pa.array(range(5), pa.int64()))
                                .append_column("s", pa.array(["x"] * 5))])
    for t, rows in ((sample(100), 0), (sample(100).slice(13, 50), 0),
                    (sample(100).slice(0, 0), 0), (big, 0), (big.slice(5, n - 10), 0),
                    (chunked, n)):
        parts = list(spillway.tables.batches(t, br, tier, rows))
        assert all(p.on_gpu == (tier == "DEVICE") for p in parts)
        assert pa.concat_tables([spillway.to_arrow(p) for p in parts]).equals(t)
        if rows:
            assert [p.num_rows for p in parts] == [n - 3, 5]
    with pytest.raises(spillway.SpillwayError, match="not DISK"):
        list(spillway.tables.batches(sample(10), br, "DISK"))


def test_a_stream_of_small_batches_comes_in_as_tables_of_up_to_rows(br):
    t = sample(100)
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=7))
    parts = list(spillway.tables.batches(reader, br, rows=30))
    assert [p.num_rows for p in parts] == [28, 28, 28, 16]  # whole batches of 7 (and 2)
    assert pa.concat_tables([spillway.to_arrow(p) for p in parts]).equals(t)
    # A batch larger than `rows` comes whole.
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=40))
    assert [p.num_rows for p in spillway.tables.batches(reader, br, rows=30)] == [40, 40, 20]


def test_record_batches_and_streams(br):
    t = sample(60)
    batch = t.combine_chunks().to_batches()[0]
    assert spillway.to_arrow(spillway.from_arrow(batch, br)).equals(t)
    chunked = pa.concat_tables([t.slice(0, 20), t.slice(20, 40)])
    reader = pa.RecordBatchReader.from_batches(chunked.schema, chunked.to_batches())
    assert spillway.to_arrow(spillway.from_arrow(reader, br)).equals(t)


def test_the_pack_format_keeps_everything(br):
    t = sample(1000)
    packed = spillway._spillway.testing.pack_round_trip(spillway.from_arrow(t, br), br)
    assert spillway.to_arrow(packed).equals(t)


def test_polars_goes_in():
    pl = pytest.importorskip("polars")
    br = spillway.BufferResource(use_gpu=False)
    df = pl.DataFrame({"a": [1, 2, None], "b": ["x", None, "z"]})
    back = spillway.to_arrow(spillway.from_arrow(df, br))
    assert back.to_pydict() == {"a": [1, 2, None], "b": ["x", None, "z"]}


def test_what_is_not_arrow_is_a_type_error(br):
    with pytest.raises(TypeError, match="Arrow PyCapsule"):
        spillway.from_arrow([1, 2, 3], br)


@pytest.mark.parametrize("bad,why", [(pa.array([1], pa.timestamp("s", tz="UTC")), "time zone"),
                                     (pa.array([1], pa.decimal256(40, 2)), "decimal256"),
                                     (pa.array([1], pa.time64("us")), "not supported"),
                                     (pa.array([[1]], pa.list_(pa.int32())), "not supported")])
def test_unsupported_types_name_the_column(br, bad, why):
    t = pa.table({"ok": [1], "when": bad})
    with pytest.raises(spillway.UsageError, match=f"'when'.*{why}"):
        spillway.from_arrow(t, br)


def test_decimals_dates_and_timestamps_keep_their_types(br):
    t = sample(50)
    back = spillway.to_arrow(spillway.from_arrow(t, br))
    assert back.schema == t.schema
    assert back.column("decimal128(38, 10)").to_pylist() == t.column("decimal128(38, 10)").to_pylist()


@pytest.mark.parametrize("string_type", [pa.large_string(), pa.string_view()])
def test_large_strings_and_string_views_come_in_as_utf8(br, string_type):
    values = ["", "short", None, "a string longer than twelve bytes", "x" * 100, "twelve bytes"]
    t = pa.table({"s": pa.array(values, type=string_type)})
    back = spillway.to_arrow(spillway.from_arrow(t.slice(1), br))
    assert back.column("s").type == pa.string()
    assert back.column("s").to_pylist() == values[1:]


def test_duckdb_results_go_in():
    duckdb = pytest.importorskip("duckdb")
    br = spillway.BufferResource(use_gpu=False)
    rel = duckdb.sql("SELECT range AS i, (range * 2.5)::DOUBLE AS f, 'r' || range::VARCHAR AS s "
                     "FROM range(1000)")
    back = spillway.to_arrow(spillway.from_arrow(rel, br))
    assert back.num_rows == 1000
    assert back.column("s").to_pylist()[:3] == ["r0", "r1", "r2"]
    assert sum(back.column("i").to_pylist()) == sum(range(1000))
