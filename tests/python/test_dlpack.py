"""Fixed-width columns through DLPack: NumPy here, and PyTorch / CuPy on the GPU (skipped
without one): every dtype round trips, views share the table's memory and keep it alive,
device tables are partitioned and shuffled on the GPU, and bad arrays are clear errors."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import spillway

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float32, np.float64, np.bool_]


def values(dtype, n, seed=1):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.fixture
def br():
    return spillway.BufferResource(use_gpu=False)


@pytest.mark.parametrize("rows", [0, 1, 1000])
def test_every_dtype_round_trips_through_numpy(br, rows):
    cols = {f"c{i}": values(d, rows, i) for i, d in enumerate(DTYPES)}
    t = spillway.from_dlpack(cols, br)
    assert not t.on_gpu
    assert t.num_rows == rows and t.column_names == list(cols)
    for name, want in cols.items():
        got = np.from_dlpack(t.column(name))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # The same values through Arrow.
    arrow = pa.table(t)
    for name, want in cols.items():
        np.testing.assert_array_equal(arrow.column(name).to_numpy(), want)


def test_a_column_is_a_view_that_keeps_the_table_alive(br):
    t = spillway.from_dlpack({"a": np.arange(100, dtype=np.int64)}, br)
    one = np.from_dlpack(t.column("a"))
    two = np.from_dlpack(t.column(0))
    assert np.shares_memory(one, two)
    del t
    assert int(one.sum()) == 4950


def test_the_input_is_copied_and_a_strided_array_comes_in_right(br):
    src = np.arange(20, dtype=np.int32)
    t = spillway.from_dlpack({"even": src[::2]}, br)
    src[:] = -1  # spillway holds its own copy
    np.testing.assert_array_equal(np.from_dlpack(t.column("even")), np.arange(0, 20, 2))


def test_bad_arrays_are_usage_errors(br):
    with pytest.raises(spillway.UsageError, match="shape"):
        spillway.from_dlpack({"m": np.zeros((2, 2))}, br)
    with pytest.raises(spillway.UsageError, match="no __dlpack__"):
        spillway.from_dlpack({"l": [1, 2, 3]}, br)
    with pytest.raises(spillway.UsageError, match="DLPack dtype"):
        spillway.from_dlpack({"z": np.zeros(3, np.complex64)}, br)
    with pytest.raises(spillway.UsageError, match="rows"):
        spillway.from_dlpack({"p": np.zeros(3), "q": np.zeros(4)}, br)
    t = spillway.from_arrow(pa.table({"s": ["x", "y"], "n": pa.array([1, None])}), br)
    with pytest.raises(spillway.UsageError, match="strings"):
        t.column("s")
    with pytest.raises(spillway.UsageError, match="validity mask"):
        t.column("n")
    with pytest.raises(spillway.UsageError, match="no column"):
        t.column("x")
    assert not hasattr(spillway.from_dlpack({"a": np.zeros(2)}, br).column("a"),
                       "__cuda_array_interface__")


def test_a_dlpack_table_shuffles_on_local_ranks():
    def rank(comm, br):
        keys = (np.arange(3000, dtype=np.int64) * 7 + comm.rank) % 101
        t = spillway.from_dlpack({"key": keys, "rank": np.full(3000, comm.rank, np.int32)}, br)
        return list(spillway.shuffle(t, ["key"], comm, br, partitions=6))

    results = spillway.comm.local(2, rank, use_gpu=False)
    got = pa.concat_tables([t for parts in results for _, t in parts if t.num_columns])
    assert got.num_rows == 6000
    want = sum(int(((np.arange(3000) * 7 + r) % 101).sum()) for r in range(2))
    assert pc.sum(got.column("key")).as_py() == want


gpu = pytest.mark.skipif(not spillway.cuda_available(), reason="no GPU")


@gpu
def test_torch_device_tensors_go_in_and_out_on_the_gpu():
    torch = pytest.importorskip("torch")
    br = spillway.BufferResource()
    a = torch.arange(1 << 20, dtype=torch.int64, device="cuda")
    b = torch.rand(1 << 20, dtype=torch.float32, device="cuda")
    t = spillway.from_dlpack({"a": a, "b": b}, br)
    assert t.on_gpu
    assert br.used("DEVICE") >= a.numel() * 8 + b.numel() * 4
    x = torch.from_dlpack(t.column("a"))
    y = torch.from_dlpack(t.column("a"))
    assert x.is_cuda and x.data_ptr() == y.data_ptr()  # a view, not a copy
    assert x.data_ptr() != a.data_ptr()  # of spillway's own copy
    assert torch.equal(x, a) and torch.equal(torch.from_dlpack(t.column("b")), b)
    # Out to Arrow through a host copy.
    arrow = pa.table(t)
    np.testing.assert_array_equal(arrow.column("a").to_numpy(), a.cpu().numpy())


@gpu
def test_cupy_takes_a_device_column_through_the_cuda_array_interface():
    cupy = pytest.importorskip("cupy")
    br = spillway.BufferResource()
    src = cupy.arange(10000, dtype=cupy.float64)
    t = spillway.from_dlpack({"v": src}, br)
    col = t.column("v")
    iface = col.__cuda_array_interface__
    assert iface["shape"] == (10000,) and iface["typestr"] == "<f8"
    view = cupy.asarray(col)
    assert view.data.ptr == iface["data"][0]
    assert float(view.sum()) == float(src.sum())
    assert bool((cupy.from_dlpack(col) == src).all())


@gpu
def test_a_device_table_is_shuffled_on_the_gpu():
    torch = pytest.importorskip("torch")

    def rank(comm, br):
        keys = (torch.arange(50000, device="cuda", dtype=torch.int64) * 13 + comm.rank) % 997
        t = spillway.from_dlpack({"key": keys, "v": keys.to(torch.float64)}, br)
        out = []
        for _, part in spillway.shuffle(t, ["key"], comm, br, partitions=8, device=True):
            if part.num_columns:
                assert part.on_gpu
                out.append(torch.from_dlpack(part.column("key")).sum().item())
        return out

    results = spillway.comm.local(2, rank)
    want = sum(((np.arange(50000) * 13 + r) % 997).sum() for r in range(2))
    assert sum(sum(r) for r in results) == want


@gpu
def test_a_join_of_device_tables_runs_on_the_gpu():
    torch = pytest.importorskip("torch")

    def rank(comm, br):
        # Left: 30000 rows a rank, keys 0..99; right: keys 0..99 split between the ranks.
        k = (torch.arange(30000, device="cuda", dtype=torch.int64) * 7 + comm.rank) % 100
        left = spillway.from_dlpack({"k": k, "v": k * 3}, br)
        rk = torch.arange(comm.rank, 100, comm.nranks, device="cuda", dtype=torch.int64)
        right = spillway.from_dlpack({"k": rk, "w": rk * 10}, br)
        rows, total = 0, 0
        chunks = spillway.hash_join(left, right, ["k"], comm, br, chunk_bytes=64 << 10,
                                    partitions=4)
        for _, t in chunks:
            assert t.on_gpu
            rows += t.num_rows
            total += torch.from_dlpack(t.column("w")).sum().item()
        assert "on the GPU" in chunks.plan
        return rows, total

    results = spillway.comm.local(2, rank)
    keys = [(np.arange(30000) * 7 + r) % 100 for r in range(2)]
    assert sum(r for r, _ in results) == 60000  # every left row matches once
    assert sum(t for _, t in results) == sum(int(k.sum()) * 10 for k in keys)
