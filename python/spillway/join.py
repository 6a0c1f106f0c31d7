"""Joins: `join` of two tables in this process, and `hash_join`, the distributed join: both
sides shuffled into the same partitions by their keys, then each partition pair joined
locally as soon as both of its sides have arrived, one at a time, the others waiting
spillable."""

from __future__ import annotations

from typing import Any, Sequence

from . import _spillway
from ._args import comm_and_br
from ._operator import JoinChunks, _Handoff, _Side
from .errors import UsageError
from .shuffle import _Progress, _key_indices
from .tables import from_arrow, to_arrow

HOW = ("inner", "left", "left_semi", "left_anti", "full")


def _check_how(how: str) -> None:
    if how not in HOW:
        raise UsageError(f"how={how!r} (want one of {', '.join(HOW)})")


def _as_table(data: Any, br: _spillway.BufferResource) -> _spillway.Table:
    return data if isinstance(data, _spillway.Table) else from_arrow(data, br)


def join(left: Any, right: Any, on: Sequence[int | str],
         comm: _spillway.Communicator | None = None, br: _spillway.BufferResource | None = None,
         *, how: str = "inner", right_on: Sequence[int | str] | None = None) -> Any:
    """The hash join of two tables (anything with the Arrow PyCapsule interface, or spillway
    Tables in host memory) on key columns `on` of the left and `right_on` (default `on`) of the
    right, as a pyarrow Table: the left columns, then for inner, left and full joins the right
    ones (a name already taken gets "_right"). SQL semantics: a null key matches nothing."""
    _, br = comm_and_br("join", comm, br, needs_comm=False, local_only=True)
    _check_how(how)
    lt, rt = _as_table(left, br), _as_table(right, br)
    lk = _key_indices(on, lt.column_names)
    rk = _key_indices(on if right_on is None else right_on, rt.column_names)
    return to_arrow(_spillway.join_tables(lt, rt, lk, rk, how, br))


def hash_join(left: Any, right: Any, on: Sequence[int | str],
              comm: _spillway.Communicator | None = None,
              br: _spillway.BufferResource | None = None, *, how: str = "inner",
              right_on: Sequence[int | str] | None = None, partitions: int | None = None,
              op_id: int = 0, progress: bool = False, right_bytes: int | None = None,
              chunk_bytes: int | None = None, batch_rows: int = 65536,
              device: bool = False) -> "JoinChunks":
    """The distributed hash join (C++ `ops::hash_join`): each rank gives its part of both sides
    (tables or streams, as shuffle takes them; spillway Tables on the GPU are joined there) and
    gets (partition, pyarrow Table) for every chunk of its joined rows, as they are made: the
    output of a partition comes in chunks of at most `chunk_bytes` (default: 64 MiB, at most an
    eighth of the host limit), each partition's one after another. The plan chooses the
    partition count from `right_bytes` (the right side's bytes over all ranks, when known), or
    takes `partitions`; the JoinChunks returned says which it ran (`plan`) once exhausted.
    Every rank must call it with the same on, how, partitions and op_id (ids op_id .. op_id + 2
    are used). A pyarrow table goes in slices of `batch_rows` rows; each side's next batch is
    imported in a thread of its own while the join works on the one before (JoinChunks'
    `input_seconds` says how long the join still waited for its input). progress=True: a tqdm
    bar of the bytes received and the chunks handed out. device=True: every batch is copied
    straight from its Arrow buffers to the GPU (through pinned staging), the join runs there,
    and the chunks are spillway Tables on the GPU (as they are when the inputs are spillway
    Tables on the GPU)."""
    comm, br = comm_and_br("hash_join", comm, br, needs_comm=True)
    _check_how(how)
    right_keys = on if right_on is None else right_on
    handoff = _Handoff("hash_join")
    try:
        sides = [_Side(left, on, br, batch_rows, device, handoff.stopped),
                 _Side(right, right_keys, br, batch_rows, device, handoff.stopped)]
    except BaseException:
        handoff.stopped.set()  # ends the threads of the sides made so far
        raise
    run = lambda out: _spillway.hash_join_op(  # noqa: E731
        comm, br, sides[0].next, sides[0].keys, sides[1].next, sides[1].keys, how,
        partitions or 0, right_bytes or 0, chunk_bytes or 0, op_id, out)
    return JoinChunks(run, _Progress(progress, comm, br, None), handoff, sides)
