"""Tables in and out: anything with __arrow_c_array__ or __arrow_c_stream__ goes in, pyarrow
comes out; fixed-width columns also through DLPack (from_dlpack in, column() out)."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from . import _spillway
from .tier import Tier, tier_name
from .errors import UsageError


def batches(data: Any, br: _spillway.BufferResource, tier: "Tier | str" = "HOST",
            rows: int = 0) -> Iterator[_spillway.Table]:
    """spillway Tables, one per record batch of `data` (a stream is read as it goes), each
    copied into `tier` ("DEVICE": straight to the GPU); spillway Tables as they are. With
    `rows`, a stream's consecutive batches are copied into one table while they fit in that
    many rows (a Parquet file's row groups, say)."""
    tier = tier_name(tier)
    if isinstance(data, _spillway.Table):
        yield data
    elif hasattr(data, "__arrow_c_array__"):
        schema, array = data.__arrow_c_array__()
        yield _spillway.table_from_capsules(schema, array, br, tier)
    elif hasattr(data, "__arrow_c_stream__"):
        reader = _spillway.ArrowStreamReader(data.__arrow_c_stream__())
        empty = True
        while True:
            batch = reader.next(br, tier, rows)
            if batch is None:
                break
            empty = False
            yield batch
            del batch  # before the next one is read: one batch at a time in memory
        if empty:  # no batch at all: a table of no rows, with the stream's columns
            import pyarrow as pa
            schema = pa.Schema._import_from_c_capsule(reader.schema())
            yield from batches(pa.RecordBatch.from_pylist([], schema=schema), br, tier)
    elif isinstance(data, (list, tuple)) or hasattr(data, "__next__"):
        for part in data:  # a sequence or stream of tables (or of anything else this takes)
            yield from batches(part, br, tier, rows)
    else:
        raise TypeError(f"spillway takes tables through the Arrow PyCapsule interface "
                        f"(__arrow_c_stream__ or __arrow_c_array__); {type(data).__name__} "
                        f"has neither")


def from_arrow(data: Any, br: _spillway.BufferResource) -> _spillway.Table:
    """One spillway Table (a copy) of all of `data`'s batches."""
    parts = list(batches(data, br))
    if len(parts) == 1:
        return parts[0]
    import pyarrow as pa  # several batches: concatenated on the Arrow side
    return from_arrow(pa.concat_tables([to_arrow(p) for p in parts]).combine_chunks(), br)


def to_arrow(table: _spillway.Table):
    """The table as a pyarrow.Table."""
    import pyarrow as pa
    return pa.table(pa.record_batch(table))


def from_dlpack(columns: Mapping[str, Any], br: _spillway.BufferResource) -> _spillway.Table:
    """A spillway Table copied from one-dimensional arrays with __dlpack__ (PyTorch, CuPy,
    NumPy, JAX), named by the mapping's keys: arrays on the GPU into DEVICE memory (a copy on
    the GPU, none through the host), host arrays into HOST memory. Columns are fixed-width
    (int8..int64, uint8..uint64, float32, float64, bool) and have no nulls; for strings and
    nulls use the Arrow interface."""
    names = [str(n) for n in columns]
    arrays = list(columns.values())
    for name, a in zip(names, arrays):
        if not hasattr(a, "__dlpack__"):
            raise UsageError(f"column {name!r}: {type(a).__name__} has no __dlpack__ (want a "
                             f"PyTorch, CuPy, NumPy or JAX array)")
        shape = getattr(a, "shape", None)
        if shape is not None and len(shape) != 1:
            raise UsageError(f"column {name!r}: an array of shape {tuple(shape)} (want one "
                             f"dimension)")
    try:
        return _spillway.table_from_arrays(arrays, names, br)
    except TypeError as e:  # nanobind could not take one of them
        raise UsageError(f"columns {names}: not one-dimensional DLPack arrays ({e})") from None


class ColumnArray:
    """One column of a spillway Table as an array, without a copy: DLPack
    (`torch.from_dlpack`, `cupy.from_dlpack`, `numpy.from_dlpack`) and, for a column on the
    GPU, `__cuda_array_interface__`. It keeps the table alive."""

    __slots__ = ("_array", "_interface")

    def __init__(self, table: _spillway.Table, column: int | str):
        if isinstance(column, str):
            if column not in table.column_names:
                raise UsageError(f"no column {column!r} (the columns: {table.column_names})")
            column = table.column_names.index(column)
        self._array = _spillway.column_array(table, int(column))
        self._interface = _spillway.column_interface(table, int(column))

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict:
        if self._interface is None:
            raise AttributeError("the column is in host memory: use __dlpack__ (numpy.from_dlpack)")
        return self._interface


def column(table: _spillway.Table, key: int | str) -> ColumnArray:
    """Column `key` (a name or an index) of `table` as a ColumnArray (see there)."""
    return ColumnArray(table, key)
