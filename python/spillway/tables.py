"""Tables in and out: anything with __arrow_c_array__ or __arrow_c_stream__ goes in, pyarrow
comes out."""

from __future__ import annotations

from typing import Any, Iterator

from . import _spillway


def batches(data: Any, br: _spillway.BufferResource) -> Iterator[_spillway.Table]:
    """spillway Tables, one per record batch of `data` (a stream is read as it goes)."""
    if isinstance(data, _spillway.Table):
        yield data
    elif hasattr(data, "__arrow_c_array__"):
        schema, array = data.__arrow_c_array__()
        yield _spillway.table_from_capsules(schema, array, br)
    elif hasattr(data, "__arrow_c_stream__"):
        reader = _spillway.ArrowStreamReader(data.__arrow_c_stream__())
        empty = True
        while True:
            batch = reader.next(br)
            if batch is None:
                break
            empty = False
            yield batch
            del batch  # before the next one is read: one batch at a time in memory
        if empty:  # no batch at all: a table of no rows, with the stream's columns
            import pyarrow as pa
            schema = pa.Schema._import_from_c_capsule(reader.schema())
            yield from batches(pa.RecordBatch.from_pylist([], schema=schema), br)
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
