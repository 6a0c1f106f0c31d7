"""How spillway's operators run from Python (internal): the C++ operator in a thread of its
own, each input read one table ahead (_Side), and its output handed to the consumer one chunk
at a time (_Handoff, JoinChunks). hash_join and the distributed groupby run this way."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Sequence

from . import _spillway
from ._ahead import Ahead, offer
from .errors import UsageError
from .shuffle import _POLL_SECONDS, _Progress, _in_slices, _key_indices
from .tables import batches, to_arrow


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
                                        daemon=True, name=f"spillway-{handoff.what}")
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
    """What the operator's thread and its consumer share: a queue of one item and a stop flag.
    `what` names the operator in errors."""

    def __init__(self, what: str) -> None:
        self.items: queue.Queue = queue.Queue(maxsize=1)
        self.stopped = threading.Event()
        self.what = what

    def offer(self, item: Any) -> bool:
        return offer(self.items, item, self.stopped)

    def out(self, pid: int, table: Any) -> None:
        if not self.offer((pid, table)):
            raise UsageError(f"{self.what}: its consumer stopped taking chunks")

    def work(self, run: Callable[[Callable[[int, Any], None]], str]) -> None:
        try:
            self.offer(_Done(plan=run(self.out)))
        except BaseException as e:  # handed to the consumer, which raises it
            self.offer(_Done(error=e))


class _Done:
    def __init__(self, plan: str | None = None, error: BaseException | None = None):
        self.plan = plan
        self.error = error
