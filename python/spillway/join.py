"""Joins: `join` of two tables in this process, and `hash_join`, the distributed join of the
seed article: both sides shuffled into the same partitions by their keys, then each partition
pair joined locally as soon as both of its sides have arrived, one at a time, the others
waiting spillable."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator, Sequence

from . import _spillway
from ._ahead import Ahead, offer
from .errors import UsageError
from .shuffle import _POLL_SECONDS, _Progress, _in_slices, _key_indices
from .tables import batches, from_arrow, to_arrow

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
    _check_how(how)
    right_keys = on if right_on is None else right_on
    handoff = _Handoff()
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


class _Side:
    """One side as the C++ join's source: `next` gives its next spillway Table (None at the
    end), made one ahead in a thread of its own (each batch of a pyarrow table imported, and
    with `device` copied straight to the GPU, while the join partitions the one before), and
    `keys` its key columns' indices, from its first batch (taken here, so that a bad key is a
    UsageError before anything is sent)."""

    def __init__(self, data: Any, keys: Sequence[int | str], br: _spillway.BufferResource,
                 batch_rows: int, device: bool, stop: threading.Event, what: str = "hash_join"):
        it = batches(_in_slices(data, batch_rows), br, "DEVICE" if device else "HOST",
                     batch_rows)
        if device:  # (spillway Tables given on the host)
            it = (b if b.on_gpu or not b.num_columns else b.copy("DEVICE") for b in it)
        self._ahead = Ahead(it, stop)
        first = next(self._ahead, None)
        if first is None:
            raise UsageError(f"{what}: an input gave no table (give an empty one with its "
                             "schema)")
        self.keys = _key_indices(keys, first.column_names)
        self._pending = [first]

    def next(self) -> Any:
        if self._pending:
            return self._pending.pop()
        return next(self._ahead, None)

    @property
    def first(self) -> Any:
        """Its first table, until the operator takes it (None after)."""
        return self._pending[0] if self._pending else None

    @property
    def waited(self) -> float:
        return self._ahead.waited


class JoinChunks:
    """The iterator hash_join returns: (partition, chunk) as the join makes them, while the join
    goes on in a thread of its own (without the GIL but in its callbacks) and waits for each
    chunk to be taken, so that one chunk at a time is held. `plan` is the plan it ran (in
    words), once the iterator is exhausted. When the consumer stops early (close(), or drops
    the iterator), the join's next chunk raises in the join, which ends it."""

    def __init__(self, run: Callable[[Callable[[int, Any], None]], str], bar: _Progress,
                 handoff: "_Handoff", sides: list[_Side]):
        self.plan: str | None = None
        self._bar = bar
        self._handed = 0
        self._done = False
        self._sides = sides
        # The thread holds the handoff, not this object, so that dropping this stops the join.
        self._handoff = handoff
        self._thread = threading.Thread(target=_Handoff.work, args=(self._handoff, run),
                                        daemon=True, name="spillway-hash-join")
        self._thread.start()

    def __iter__(self) -> "JoinChunks":
        return self

    def __next__(self) -> tuple[int, Any]:
        if self._done:
            raise StopIteration
        try:
            while True:
                try:
                    item = self._handoff.items.get(timeout=_POLL_SECONDS)  # Ctrl-C is seen
                except queue.Empty:
                    continue
                break
        except BaseException:
            self._finish(wait=False)  # (the join may be in a wait of its own)
            raise
        if isinstance(item, _Done):
            self._finish(wait=True)
            if item.error is not None:
                raise item.error
            self.plan = item.plan
            raise StopIteration
        pid, table = item
        self._handed += 1
        self._bar.update(self._handed)
        return pid, (table if table.on_gpu else to_arrow(table))

    @property
    def input_seconds(self) -> float:
        """The time the join waited for its input's batches (those of both sides, imported
        and copied one ahead while it works): what the overlap did not hide."""
        return sum(side.waited for side in self._sides)

    def close(self) -> None:
        """Stops the join (its next chunk raises in it) and waits for its thread."""
        self._finish(wait=True)

    def __del__(self) -> None:
        self._handoff.stopped.set()

    def _finish(self, wait: bool) -> None:
        if self._done:
            return
        self._done = True
        self._handoff.stopped.set()
        if wait:
            self._thread.join()
        self._bar.close()


class _Handoff:
    """What the join's thread and its consumer share: a queue of one item and a stop flag."""

    def __init__(self) -> None:
        self.items: queue.Queue = queue.Queue(maxsize=1)
        self.stopped = threading.Event()

    def offer(self, item: Any) -> bool:
        return offer(self.items, item, self.stopped)

    def out(self, pid: int, table: Any) -> None:
        if not self.offer((pid, table)):
            raise UsageError("hash_join: its consumer stopped taking chunks")

    def work(self, run: Callable[[Callable[[int, Any], None]], str]) -> None:
        try:
            self.offer(_Done(plan=run(self.out)))
        except BaseException as e:  # handed to the consumer, which raises it
            self.offer(_Done(error=e))


class _Done:
    def __init__(self, plan: str | None = None, error: BaseException | None = None):
        self.plan = plan
        self.error = error
