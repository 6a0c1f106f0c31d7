"""Sort: `sort` of a table in this process, or of a distributed one (comm given): each rank
samples its rows, the samples give the splitters, every row goes to the rank whose range holds
it, and each rank sorts its range. ORDER BY as DuckDB runs it, and stable: rows of equal keys
keep their order (over the ranks: rank 0's first)."""

from __future__ import annotations

from typing import Any, Sequence

from . import _spillway
from ._args import comm_and_br
from ._operator import JoinChunks, _Handoff, _Side
from .errors import UsageError
from .shuffle import _Progress, _in_slices, _key_indices
from .tables import batches, from_arrow, to_arrow


def _key_specs(keys: Sequence[int], descending: Any, nulls_first: Any):
    """(column index, descending, nulls first) per key column index; `descending` and
    `nulls_first` one bool for every key or one per key."""
    n = len(keys)

    def per_key(value: Any, what: str) -> list[bool]:
        if isinstance(value, (list, tuple)):
            if len(value) != n:
                raise UsageError(f"sort: {what} has {len(value)} entries for {n} keys")
            return [bool(v) for v in value]
        return [bool(value)] * n

    return list(zip(keys, per_key(descending, "descending"),
                    per_key(nulls_first, "nulls_first")))


def sort(data: Any, by: str | Sequence[str], comm: _spillway.Communicator | None = None,
         br: _spillway.BufferResource | None = None, *, descending: bool | Sequence[bool] = False,
         nulls_first: bool | Sequence[bool] = False, limit: int | None = None, op_id: int = 0,
         batch_rows: int = 65536, samples: int = 1024) -> Any:
    """ORDER BY `by` (column names), each key `descending` or not, nulls last unless
    `nulls_first` (DuckDB's defaults); `limit` keeps the first rows only (top-k). Without
    `comm`: a pyarrow Table of the sorted rows. With `comm`, every rank calls it with its part
    of the data and gets its range of the global order as a pyarrow Table (rank 0's first;
    with `limit`, all on rank 0). `samples` rows of each rank choose the ranges."""
    comm, br = comm_and_br("sort", comm, br, needs_comm=False)
    by = [by] if isinstance(by, str) else [str(k) for k in by]
    if not by:
        raise UsageError("sort: no keys")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise UsageError(f"sort: limit must be an int of at least 0, not {limit!r}")
    if comm is None:
        import pyarrow as pa
        parts = [to_arrow(b) for b in batches(_in_slices(data, 1 << 20), br, rows=1 << 20)]
        if not parts:
            raise UsageError("sort of a table without rows or columns: no schema to sort")
        table = from_arrow(pa.concat_tables(parts), br)
        keys = _key_specs(_key_indices(by, table.column_names), descending, nulls_first)
        return to_arrow(_spillway.sort_table(table, keys, br, limit))
    return _distributed(data, by, descending, nulls_first, limit, br, comm, op_id, batch_rows,
                        samples)


def _distributed(data, by, descending, nulls_first, limit, br, comm, op_id, batch_rows, samples):
    """C++ ops::sort, in a thread of its own as hash_join runs, its input read a table of
    `batch_rows` ahead; this rank's range once every rank's rows are in."""
    handoff = _Handoff("sort")
    side = _Side(data, by, br, batch_rows, False, handoff.stopped, "sort")
    try:
        first = side.first
        if first.on_gpu:
            raise UsageError("sort: the table must be in host memory")
        keys = _key_specs(side.keys, descending, nulls_first)
    except BaseException:
        handoff.stopped.set()  # ends the side's thread
        raise
    run = lambda out: _spillway.sort_op(  # noqa: E731
        comm, br, side.next, keys, samples, limit, op_id, out) or ""
    parts = [part for _, part in JoinChunks(run, _Progress(False, comm, br, None), handoff, [side])]
    return parts[0]
