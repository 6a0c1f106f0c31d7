"""spillway.shuffle: the all-to-all exchange of tables, partitioned by hashing key columns."""

from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

from . import _spillway
from ._args import comm_and_br
from .errors import UsageError
from .tables import batches, from_arrow, to_arrow

_POLL_SECONDS = 0.1  # the slices a wait is made of, so that Ctrl-C is seen between them


def _key_indices(keys: Sequence[int | str], names: Sequence[str]) -> list[int]:
    out = []
    for k in keys:
        if isinstance(k, str):
            if k not in names:
                raise UsageError(f"key column {k!r} is not one of {list(names)}")
            out.append(list(names).index(k))
        else:
            out.append(int(k))
    return out


def _in_slices(data: Any, rows: int) -> Any:
    """A pyarrow Table or RecordBatch as a stream of batches of at most `rows` rows, so that
    spillway copies and partitions a slice at a time (its memory limit then bounds each
    step, not the whole input); anything else as it is."""
    try:
        import pyarrow as pa
    except ImportError:
        return data
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=rows))
    return data


def shuffle(data: Any, keys: Sequence[int | str], comm: _spillway.Communicator | None = None,
            br: _spillway.BufferResource | None = None, *, partitions: int | None = None,
            op_id: int = 0, batch_rows: int = 65536, progress: bool = False,
            device: bool = False) -> Iterator[tuple[int, Any]]:
    """Shuffles `data` (anything with __arrow_c_stream__ or __arrow_c_array__; a stream is
    inserted batch by batch) between the ranks of `comm`: rows go to the owner of the hash of
    their key columns (names or indices) modulo `partitions` (default: one per rank). Yields
    (partition, pyarrow.Table) for this rank's partitions as they complete. Every rank must
    call it with the same keys, partitions and op_id. A pyarrow table goes in slices of
    `batch_rows` rows. Waits raise CommError after comm.timeout seconds without progress;
    Ctrl-C raises KeyboardInterrupt. progress=True shows a tqdm bar per rank of the bytes it
    has received and the partitions it has handed out (tqdm must be installed).
    device=True yields spillway Tables on the GPU instead (take their columns with
    `table.column(name)` through DLPack); `data` may then be a spillway Table on the GPU
    (spillway.from_dlpack), which is partitioned there."""
    comm, br = comm_and_br("shuffle", comm, br, needs_comm=True)
    for pid, (table,) in shuffle_together([(data, keys)], comm, br, partitions=partitions,
                                          op_id=op_id, batch_rows=batch_rows,
                                          progress=progress, device=device):
        yield pid, table


class _Progress:
    """A tqdm bar of one rank's received shuffle bytes (the `shuffle-payload-recv` statistic,
    counted from the bar's start) and handed-out partitions (of `partitions`; None: chunks of
    a join's output); nothing when off."""

    def __init__(self, on: bool, comm: _spillway.Communicator, br: _spillway.BufferResource,
                 partitions: int | None):
        self._bar = None
        if not on:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            raise UsageError("progress=True needs tqdm (pip install tqdm)") from None
        self._br = br
        self._start = self._received()
        self._shown = 0.0
        self._parts = partitions
        self._bar = tqdm(unit="B", unit_scale=True, unit_divisor=1024, position=comm.rank,
                         desc=f"rank {comm.rank}/{comm.nranks} shuffle", leave=True)
        self.update(0)

    def _received(self) -> float:
        return self._br.statistics().get("shuffle-payload-recv", {}).get("bytes", 0.0)

    def update(self, handed: int) -> None:
        if self._bar is None:
            return
        now = self._received() - self._start
        if now > self._shown:
            self._bar.update(now - self._shown)
            self._shown = now
        what = f"chunks {handed}" if self._parts is None else f"partitions {handed}/{self._parts}"
        self._bar.set_postfix_str(what, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _insert(s: _spillway.Shuffler, data: Any, keys: Sequence[int | str],
            br: _spillway.BufferResource, batch_rows: int):
    """Inserts every batch of `data`; returns its schema (None for no columns)."""
    schema = None
    key_columns: list[int] = []
    first = True
    for batch in batches(_in_slices(data, batch_rows), br, rows=batch_rows):
        if first:
            first = False
            # (A table on the GPU is not copied to the host for its schema: its empty
            # partitions come out without columns.)
            on_gpu = isinstance(batch, _spillway.Table) and batch.on_gpu
            if batch.num_columns and not on_gpu:
                schema = to_arrow(batch).schema
            key_columns = _key_indices(keys, batch.column_names)
        if batch.num_rows:
            s.insert(batch, key_columns)
        del batch  # its copy is freed before the next batch is read
    s.insert_finished()
    return schema


def shuffle_together(inputs: Sequence[tuple[Any, Sequence[int | str]]],
                     comm: _spillway.Communicator | None = None,
                     br: _spillway.BufferResource | None = None, *,
                     partitions: int | None = None, op_id: int = 0, batch_rows: int = 65536,
                     progress: bool = False, device: bool = False,
                     ) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Shuffles several tables into the same partitions at once (the two sides of a join: rows
    with equal keys meet in one partition) and yields (partition, (table of each input, ...))
    once a partition has arrived from every input. The others wait where they landed, spillable,
    so that only the partition being handed over is in memory: a join of each partition in
    turn runs in bounded memory. Op ids op_id .. op_id + len(inputs) - 1 are used.
    progress and device: as shuffle's."""
    comm, br = comm_and_br("shuffle_together", comm, br, needs_comm=True)
    total = comm.nranks if partitions is None else int(partitions)
    shufflers = [_spillway.Shuffler(comm, op_id + i, total, br) for i in range(len(inputs))]
    local = shufflers[0].local_partitions if shufflers else []
    bar = _Progress(progress, comm, br, len(local))
    try:
        schemas = [_insert(s, data, keys, br, batch_rows)
                   for s, (data, keys) in zip(shufflers, inputs)]
        yield from _hand_out(shufflers, schemas, local, comm, bar, device, br)
    finally:
        bar.close()


def _hand_out(shufflers: list[_spillway.Shuffler], schemas: list[Any], local: Sequence[int],
              comm: _spillway.Communicator, bar: _Progress, device: bool | str,
              br: _spillway.BufferResource) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """shuffle_together's second half: each local partition once every input's part is in.
    device: False for pyarrow tables, True for spillway Tables on the GPU, "host" for spillway
    Tables in host memory (with their columns even when no rank had rows)."""
    import pyarrow as pa
    arrived: list[set[int]] = [set() for _ in shufflers]  # handed out, not yet extracted
    polled = [0] * len(shufflers)  # partitions each shuffler has handed out so far
    for handed, _ in enumerate(local):
        deadline = time.monotonic() + comm.timeout
        while not (ready := set.intersection(*arrived)):
            progressed = False
            for i, s in enumerate(shufflers):
                if polled[i] == len(local):
                    continue
                if time.monotonic() > deadline:
                    got = s.wait_any(0.001)  # a partition, or the CommError saying what is missing
                else:
                    got = s.poll(_POLL_SECONDS / len(shufflers))
                if got is not None:
                    arrived[i].add(got)
                    polled[i] += 1
                    progressed = True
            if progressed:
                deadline = time.monotonic() + comm.timeout
            bar.update(handed)
        pid = min(ready)
        tables = []
        for s, got, schema in zip(shufflers, arrived, schemas):
            got.discard(pid)
            part = s.extract(pid, device is True)
            if device is True:
                tables.append(part)  # (an empty Table when no rank had rows for it)
                continue
            if device == "host":
                if part.num_columns == 0 and schema is not None:
                    part = from_arrow(schema.empty_table(), br)
                tables.append(part)
                continue
            if part.num_columns == 0:  # no rank had rows for it
                tables.append(schema.empty_table() if schema is not None else pa.table({}))
            else:
                tables.append(to_arrow(part))
            del part  # spillway's copy goes before the next partition is unpacked
        bar.update(handed + 1)
        yield pid, tuple(tables)
