"""spillway.shuffle: the all-to-all exchange of tables, partitioned by hashing key columns."""

from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

from . import _spillway
from .tables import batches, to_arrow

_POLL_SECONDS = 0.1  # the slices a wait is made of, so that Ctrl-C is seen between them


def _key_indices(keys: Sequence[int | str], names: Sequence[str]) -> list[int]:
    out = []
    for k in keys:
        if isinstance(k, str):
            if k not in names:
                raise _spillway_usage(f"key column {k!r} is not one of {list(names)}")
            out.append(list(names).index(k))
        else:
            out.append(int(k))
    return out


def _spillway_usage(message: str):
    from .errors import UsageError
    return UsageError(message)


def shuffle(data: Any, keys: Sequence[int | str], comm: _spillway.Communicator,
            br: _spillway.BufferResource, partitions: int | None = None, op_id: int = 0,
            ) -> Iterator[tuple[int, Any]]:
    """Shuffles `data` (anything with __arrow_c_stream__ or __arrow_c_array__; a stream is
    inserted batch by batch) between the ranks of `comm`: rows go to the owner of the hash of
    their key columns (names or indices) modulo `partitions` (default: one per rank). Yields
    (partition, pyarrow.Table) for this rank's partitions as they complete. Every rank must
    call it with the same keys, partitions and op_id. Waits raise CommError after
    comm.timeout seconds without progress; Ctrl-C raises KeyboardInterrupt."""
    import pyarrow as pa
    total = comm.nranks if partitions is None else int(partitions)
    s = _spillway.Shuffler(comm, op_id, total, br)
    schema = None
    for batch in batches(data, br):
        if schema is None:
            schema = to_arrow(batch).schema if batch.num_columns else None
            key_columns = _key_indices(keys, batch.column_names)
        if batch.num_rows:
            s.insert(batch, key_columns)
    s.insert_finished()
    while not s.finished:
        deadline = time.monotonic() + comm.timeout
        while (pid := s.poll(_POLL_SECONDS)) is None:
            if time.monotonic() > deadline:
                s.wait_any(0.001)  # raises the CommError that says what is missing
        part = s.extract(pid)
        if part.num_columns == 0:  # no rank had rows for it
            yield pid, (schema.empty_table() if schema is not None else pa.table({}))
        else:
            yield pid, to_arrow(part)
