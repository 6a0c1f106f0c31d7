"""Ranks: `local(n, fn)` runs fn on n ranks as threads of this process; `mpi()` is this
process's rank of an MPI job (mpirun, srun or spillway-run); `transfer()` is this process's
rank under spillway-run over a transfer engine (libfabric or loopback, no MPI)."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
from typing import Any, Callable

from . import _spillway
from .errors import CommError, UsageError


TRANSPORTS = ("local", "transfer")


def local(nranks: int, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
          transport: str = "local", **limits: Any) -> list[Any]:
    """Runs fn(comm, br, *args) on `nranks` ranks, each a thread with its communicator and a
    BufferResource(**limits); returns their results in rank order. transport="local" (the
    default) moves data between the threads directly; "transfer" gives each rank a transfer
    engine of its own (SPILLWAY_TRANSFER_BACKEND and _PROVIDER choose it), as processes would
    have. A rank that raises leaves the group, so that its peers' waits on it raise CommError
    instead of hanging; then the first rank's exception is raised here (the others chained)."""
    if nranks < 1:
        raise UsageError(f"local ranks: {nranks} (at least 1)")
    if transport not in TRANSPORTS:
        raise UsageError(f"transport={transport!r} (want one of {', '.join(TRANSPORTS)})")
    comms: list[Any] = (_spillway.local_communicators(nranks) if transport == "local"
                        else [None] * nranks)
    meeting = tempfile.mkdtemp(prefix="spillway-ranks-") if transport == "transfer" else None
    token = secrets.token_hex(8)
    results: list[Any] = [None] * nranks
    errors: list[BaseException | None] = [None] * nranks

    def run(r: int) -> None:
        try:
            br = _spillway.BufferResource(**limits)
            if comms[r] is None:  # a rank over its own engine, meeting the others in `meeting`
                comms[r] = _spillway.transfer_communicator(br, r, nranks, meeting, token)
            comm = comms[r]
            if timeout is not None:
                comm.timeout = timeout
            results[r] = fn(comm, br, *args)
        except BaseException as e:  # noqa: BLE001 (reported below, in rank order)
            errors[r] = e
            if comms[r] is not None:
                comms[r].leave()
            comms[r] = None  # a transfer rank's engine ends with it: its peers see it gone

    threads = [threading.Thread(target=run, args=(r,), name=f"spillway-rank-{r}")
               for r in range(nranks)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C here: every rank leaves, so that their waits end
        for c in list(comms):
            if c is not None:
                c.leave()
        for t in threads:
            t.join()
        raise
    finally:
        if meeting is not None:
            shutil.rmtree(meeting, ignore_errors=True)
    failed = [e for e in errors if e is not None]
    if failed:
        # The root cause first: a rank's own error rather than its peers' CommErrors.
        failed.sort(key=lambda e: isinstance(e, CommError))
        raise failed[0]
    return results


_finalize_registered = False


def mpi(br: _spillway.BufferResource, comm: Any = None) -> _spillway.Communicator:
    """This process's communicator in the MPI job (collective: every rank calls it), or, with
    `comm` an mpi4py communicator, over a duplicate of that one (collective over it; its ranks
    are spillway's). MPI is finalized at exit: drop the communicators (and Shufflers) before
    then."""
    global _finalize_registered
    if not _spillway.mpi_is_compiled():
        raise UsageError("spillway was built without MPI")
    if comm is None:
        out = _spillway.mpi_communicator(br)
    else:
        out = _spillway.mpi_communicator_of(br, _mpi4py_address(comm))
    if not _finalize_registered:
        import atexit
        atexit.register(_spillway.mpi_finalize)
        _finalize_registered = True
    return out


def transfer(br: _spillway.BufferResource, *, backend: str = "", provider: str = "",
             address: str = "") -> _spillway.Communicator:
    """This process's rank under spillway-run, over a transfer engine of its own: libfabric's
    `provider` (shm between processes of one node, tcp across nodes; default
    SPILLWAY_TRANSFER_PROVIDER), no MPI needed. Collective: every rank calls it. `address`:
    the address its engine binds to (default SPILLWAY_TRANSFER_ADDRESS)."""
    if "SPILLWAY_RUN_RANK" not in os.environ:
        raise UsageError("spillway.comm.transfer() runs under spillway-run (no SPILLWAY_RUN_RANK "
                         "here); spillway.comm.local(n, fn, transport='transfer') runs ranks "
                         "as threads")
    return _spillway.transfer_communicator(br, backend=backend, provider=provider,
                                           address=address)


def _mpi4py_address(comm: Any) -> int:
    """The address of an mpi4py communicator's MPI_Comm handle, after checking that it is one
    (an intracommunicator, not MPI.COMM_NULL)."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise UsageError(f"comm={comm!r}: not an mpi4py communicator (mpi4py is not "
                         "installed)") from None
    if not isinstance(comm, MPI.Intracomm):
        raise UsageError(f"comm={comm!r}: not an mpi4py intracommunicator (MPI.Intracomm)")
    if comm == MPI.COMM_NULL:
        raise UsageError("comm=MPI.COMM_NULL")
    return MPI._addressof(comm)
