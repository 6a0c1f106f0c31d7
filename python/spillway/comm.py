"""Ranks: `local(n, fn)` runs fn on n ranks as threads of this process; `mpi()` is this
process's rank of an MPI job (mpirun, srun or spillway-run)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from . import _spillway
from .errors import CommError, UsageError


def local(nranks: int, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
          **limits: Any) -> list[Any]:
    """Runs fn(comm, br, *args) on `nranks` ranks, each a thread with its communicator and a
    BufferResource(**limits); returns their results in rank order. A rank that raises leaves
    the group, so that its peers' waits on it raise CommError instead of hanging; then the
    first rank's exception is raised here (the others chained)."""
    if nranks < 1:
        raise UsageError(f"local ranks: {nranks} (at least 1)")
    comms = _spillway.local_communicators(nranks)
    results: list[Any] = [None] * nranks
    errors: list[BaseException | None] = [None] * nranks

    def run(r: int) -> None:
        comm = comms[r]
        if timeout is not None:
            comm.timeout = timeout
        try:
            br = _spillway.BufferResource(**limits)
            results[r] = fn(comm, br, *args)
        except BaseException as e:  # noqa: BLE001 (reported below, in rank order)
            errors[r] = e
            comm.leave()

    threads = [threading.Thread(target=run, args=(r,), name=f"spillway-rank-{r}")
               for r in range(nranks)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C here: every rank leaves, so that their waits end
        for c in comms:
            c.leave()
        for t in threads:
            t.join()
        raise
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
