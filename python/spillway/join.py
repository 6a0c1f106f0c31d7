"""Joins: `join` of two tables in this process, and `hash_join`, the distributed join of the
seed article: both sides shuffled into the same partitions by their keys, then each partition
pair joined locally as soon as both of its sides have arrived, one at a time, the others
waiting spillable."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from . import _spillway
from .errors import UsageError
from .shuffle import _key_indices, shuffle_together
from .tables import from_arrow, to_arrow

HOW = ("inner", "left", "left_semi", "left_anti", "full")


def _check_how(how: str) -> None:
    if how not in HOW:
        raise UsageError(f"how={how!r} (want one of {', '.join(HOW)})")


def _as_table(data: Any, br: _spillway.BufferResource) -> _spillway.Table:
    return data if isinstance(data, _spillway.Table) else from_arrow(data, br)


def join(left: Any, right: Any, on: Sequence[int | str], br: _spillway.BufferResource,
         how: str = "inner", right_on: Sequence[int | str] | None = None) -> Any:
    """The hash join of two tables (anything with the Arrow PyCapsule interface, or spillway
    Tables in host memory) on key columns `on` of the left and `right_on` (default `on`) of the
    right, as a pyarrow Table: the left columns, then for inner, left and full joins the right
    ones (a name already taken gets "_right"). SQL semantics: a null key matches nothing."""
    _check_how(how)
    lt, rt = _as_table(left, br), _as_table(right, br)
    lk = _key_indices(on, lt.column_names)
    rk = _key_indices(on if right_on is None else right_on, rt.column_names)
    return to_arrow(_spillway.join_tables(lt, rt, lk, rk, how, br))


def hash_join(left: Any, right: Any, on: Sequence[int | str], comm: _spillway.Communicator,
              br: _spillway.BufferResource, how: str = "inner",
              right_on: Sequence[int | str] | None = None, partitions: int | None = None,
              op_id: int = 0, progress: bool = False) -> Iterator[tuple[int, Any]]:
    """The distributed hash join: each rank gives its part of both sides (tables or streams,
    as shuffle takes them) and gets, for each of its partitions, (partition, pyarrow Table of
    that partition's joined rows) as soon as both sides of it have arrived. `partitions`
    (default: one per rank; more keep each pair smaller) must be the same on every rank, as
    must `on`, `how` and `op_id` (ids op_id and op_id + 1 are used). Every rank must call it."""
    _check_how(how)
    right_keys = on if right_on is None else right_on
    for pid, (lt, rt) in shuffle_together([(left, on), (right, right_keys)], comm, br,
                                          partitions, op_id, progress=progress, device="host"):
        if lt.num_columns == 0 or rt.num_columns == 0:
            # A side that no rank gave columns for (an input without any): only the joins
            # that need none of its columns can be answered.
            if lt.num_columns == 0 and how != "full":
                continue  # no left rows: nothing comes out
            if rt.num_columns == 0 and how in ("inner", "left_semi"):
                continue
            if rt.num_columns == 0 and how == "left_anti":
                yield pid, to_arrow(lt)
                continue
            raise UsageError(f"hash_join(how={how!r}): one side has no columns on any rank "
                             "(give its empty table its schema)")
        lk = _key_indices(on, lt.column_names)
        rk = _key_indices(right_keys, rt.column_names)
        yield pid, to_arrow(_spillway.join_tables(lt, rt, lk, rk, how, br))
