"""An iterator made one item ahead of its consumer, in a thread of its own."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Iterator

from .shuffle import _POLL_SECONDS

_END = object()


def offer(items: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Puts `item` into `items` once there is room; False, leaving it out, once `stop` is set."""
    while not stop.is_set():
        try:
            items.put(item, timeout=_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False


class Ahead:
    """Makes the items of `it` in a thread of its own, one ahead of the consumer: while the
    consumer works on one item the next is made (for the join, an Arrow batch imported and
    copied to the GPU, without the GIL, while the GPU partitions the one before), and never
    more than one, so that memory holds two items at most. An error of `it` is raised where its
    item would have come. `stop` (set when the consumer is gone) ends the thread. `waited` is
    the time the consumer spent waiting for items: what the overlap did not hide."""

    def __init__(self, it: Iterator[Any], stop: threading.Event):
        self.waited = 0.0
        self._items: queue.Queue = queue.Queue(maxsize=1)
        self._wanted = threading.Semaphore(0)  # a token per item taken: make the next
        self._stop = stop
        self._ended = False
        threading.Thread(target=self._work, args=(it,), daemon=True,
                         name="spillway-ahead").start()

    def __iter__(self) -> "Ahead":
        return self

    def __next__(self) -> Any:
        t0 = time.perf_counter()
        while True:
            if self._ended or self._stop.is_set():
                raise StopIteration
            try:
                item = self._items.get(timeout=_POLL_SECONDS)
                break
            except queue.Empty:
                continue
        self.waited += time.perf_counter() - t0
        if item is _END:
            self._ended = True
            raise StopIteration
        if isinstance(item, _Raised):
            raise item.error
        self._wanted.release()
        return item

    def _work(self, it: Iterator[Any]) -> None:
        try:
            for item in it:
                if not self._offer(item) or not self._wait_wanted():
                    return
                del item  # the consumer's now
            self._offer(_END)
        except BaseException as e:  # raised to the consumer
            self._offer(_Raised(e))

    def _offer(self, item: Any) -> bool:
        return offer(self._items, item, self._stop)

    def _wait_wanted(self) -> bool:
        while not self._stop.is_set():
            if self._wanted.acquire(timeout=_POLL_SECONDS):
                return True
        return False


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error
