"""The arguments every operator shares, checked once: each takes its inputs, then its keys
(and aggregations), then `comm` and `br`, in that order; a local operation takes no comm."""

from __future__ import annotations

from typing import Any

from . import _spillway
from .errors import UsageError


def comm_and_br(who: str, comm: Any, br: Any, *, needs_comm: bool,
                local_only: bool = False) -> tuple[Any, Any]:
    """(comm, br) after checking their types. A BufferResource given where comm goes, with no
    br, is the br of a local call (`groupby(data, keys, aggs, br)`)."""
    if isinstance(comm, _spillway.BufferResource) and br is None:
        comm, br = None, comm
    if br is None:
        raise UsageError(f"{who}: br (a spillway.BufferResource) is required")
    if not isinstance(br, _spillway.BufferResource):
        raise UsageError(f"{who}: br={br!r} is not a spillway.BufferResource")
    if comm is not None and not isinstance(comm, _spillway.Communicator):
        raise UsageError(f"{who}: comm={comm!r} is not a spillway.Communicator "
                         "(spillway.comm.local, mpi or transfer make one)")
    if needs_comm and comm is None:
        raise UsageError(f"{who}: comm (a spillway.Communicator) is required")
    if local_only and comm is not None:
        raise UsageError(f"{who} is local and takes no comm; the distributed one is "
                         f"spillway.hash_join")
    return comm, br
