"""Group-by: `groupby` of a table in this process, or of a distributed one (comm given): each
rank pre-aggregates its input batch by batch, the partial results are shuffled by key, and
each partition's partials are aggregated again as soon as they have all arrived."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from . import _spillway
from ._args import comm_and_br
from ._operator import JoinChunks, _Handoff, _Side
from .errors import UsageError
from .shuffle import _Progress, _key_indices, _in_slices
from .tables import batches, to_arrow

OPS = ("count", "sum", "min", "max", "mean")
# How a partial result of each op is aggregated again: the partial columns and their op.
_PARTIAL = {"count": [("count", "sum")], "sum": [("sum", "sum")], "min": [("min", "min")],
            "max": [("max", "max")], "mean": [("sum", "sum"), ("count", "sum")]}


def _specs(aggregations: Mapping[str, str | Sequence[str]] | Sequence[tuple[str, str]]):
    items = aggregations.items() if isinstance(aggregations, Mapping) else aggregations
    out = []
    for column, ops in items:
        for op in [ops] if isinstance(ops, str) else ops:
            if op not in OPS:
                raise UsageError(f"aggregation {op!r} of {column!r} (want one of "
                                 f"{', '.join(OPS)})")
            out.append((column, op))
    if not out:
        raise UsageError("groupby: no aggregations")
    return out


def _aggregate(table: _spillway.Table, keys: Sequence[str], specs, br) -> _spillway.Table:
    names = table.column_names
    pairs = [(_key_indices([c], names)[0], op) for c, op in specs]
    return _spillway.groupby_table(table, _key_indices(keys, names), pairs, br)


def _finish(table: Any, keys: Sequence[str], specs) -> Any:
    """The final aggregation's pyarrow table renamed to "<column>_<op>", means divided."""
    import pyarrow as pa
    import pyarrow.compute as pc
    t = to_arrow(table)
    cols = [t.column(k) for k in keys]
    names = list(keys)
    for column, op in specs:
        if op == "mean":
            s = t.column(f"{column}_sum_sum").cast(pa.float64())
            c = t.column(f"{column}_count_sum").cast(pa.float64())
            cols.append(pc.if_else(pc.greater(c, 0), pc.divide(s, c), None))
        else:
            cols.append(t.column(f"{column}_{_PARTIAL[op][0][0]}_{_PARTIAL[op][0][1]}"))
        names.append(f"{column}_{op}")
    return pa.table(cols, names=names)


def groupby(data: Any, keys: Sequence[str], aggregations: Any,
            comm: _spillway.Communicator | None = None,
            br: _spillway.BufferResource | None = None, *, partitions: int | None = None,
            op_id: int = 0, batch_rows: int = 65536) -> Any:
    """GROUP BY `keys` (column names) with `aggregations` ({column: op or [ops]} or
    [(column, op)], ops count, sum, min, max, mean), as SQL does it: nulls skipped, null keys
    one group. Without `comm`: a pyarrow Table of the groups. With `comm`, every rank calls it
    with its part of the data and gets an iterator of (partition, pyarrow Table) of the groups
    it owns; each group is on exactly one rank."""
    comm, br = comm_and_br("groupby", comm, br, needs_comm=False)
    specs = _specs(aggregations)
    keys = [str(k) for k in keys]
    if comm is None:
        table = _aggregate_all(data, keys, specs, br)
        return _finish(_final(table, keys, specs, br), keys, specs)
    return _distributed(data, keys, specs, br, comm, partitions, op_id, batch_rows)


def _partial_specs(specs):
    seen, out = set(), []
    for column, op in specs:
        for pop, _ in _PARTIAL[op]:
            if (column, pop) not in seen:
                seen.add((column, pop))
                out.append((column, pop))
    return out


def _final_specs(specs):
    seen, out = set(), []
    for column, op in specs:
        for pop, fop in _PARTIAL[op]:
            if (f"{column}_{pop}", fop) not in seen:
                seen.add((f"{column}_{pop}", fop))
                out.append((f"{column}_{pop}", fop))
    return out


def _partials(data: Any, keys, specs, br, batch_rows: int) -> Iterator[_spillway.Table]:
    """Each input batch pre-aggregated, after a check of what was asked of the first one (so
    that a mean of dates is named as such, not as the sum it is made of)."""
    checked = False
    for batch in batches(_in_slices(data, batch_rows), br, rows=batch_rows):
        if not checked:
            names = batch.column_names
            _spillway.groupby_check(batch, _key_indices(keys, names),
                                    [(_key_indices([c], names)[0], op) for c, op in specs], br)
            checked = True
        if batch.num_rows:
            yield _aggregate(batch, keys, _partial_specs(specs), br)
        del batch


def _aggregate_all(data, keys, specs, br) -> _spillway.Table:
    from .tables import from_arrow
    parts = [to_arrow(p) for p in _partials(data, keys, specs, br, 1 << 20)]
    if not parts:
        raise UsageError("groupby of a table without rows or columns: no schema to group")
    import pyarrow as pa
    return from_arrow(pa.concat_tables(parts), br)


def _final(partials: _spillway.Table, keys, specs, br) -> _spillway.Table:
    return _aggregate(partials, keys, _final_specs(specs), br)


def _distributed(data, keys, specs, br, comm, partitions, op_id, batch_rows):
    """C++ ops::groupby, in a thread of its own as hash_join runs, its input read a table of
    `batch_rows` ahead; its partitions' groups as they are made (empty ones left out)."""
    handoff = _Handoff("groupby")
    side = _Side(data, keys, br, batch_rows, False, handoff.stopped, "groupby")
    try:
        first = side.first
        if first.on_gpu:
            raise UsageError("groupby: the table must be in host memory")
        names = first.column_names
        aggs = [(_key_indices([c], names)[0], op) for c, op in specs]
        _spillway.groupby_check(first, side.keys, aggs, br)
    except BaseException:
        handoff.stopped.set()  # ends the side's thread
        raise
    run = lambda out: _spillway.groupby_op(  # noqa: E731
        comm, br, side.next, side.keys, aggs, partitions or 0, op_id, out) or ""
    for pid, part in JoinChunks(run, _Progress(False, comm, br, None), handoff, [side]):
        if part.num_rows:
            yield pid, part
