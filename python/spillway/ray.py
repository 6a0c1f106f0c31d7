"""Ranks on Ray actors: `world(n, fn)` starts n actors that form one spillway communicator
(over MPI, each actor a rank) and runs fn(comm, br) on each.

The actors find each other as spillway-run's processes do: each is told its rank, the rank
count and a private directory (SPILLWAY_RUN_*), where rank 0 publishes its MPI port, and they
connect through an ompi-server the driver starts. The directory is made on the driver's node,
so the actors run there unless `run_dir` names one that every node sees (a shared file
system). Needs PyPI's `ray`, OpenMPI's ompi-server, and spillway built with MPI.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from typing import Any, Callable

from . import _spillway
from .errors import CommError, UsageError


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("spillway.ray needs Ray (pip install ray)") from None
    return ray


class _Rank:
    """One rank: an actor process that joins the communicator once, on its first call."""

    def run(self, rank: int, nranks: int, env: dict, timeout: float | None,
            fn: Callable[..., Any], args: tuple, limits: dict) -> Any:
        import spillway  # in the actor's process
        os.environ.update(env, SPILLWAY_RUN_RANK=str(rank))
        if timeout is not None:  # (also for joining: read when MPI starts)
            os.environ["SPILLWAY_COMM_TIMEOUT"] = str(timeout)
        br = spillway.BufferResource(**limits)
        comm = spillway.comm.mpi(br)
        if timeout is not None:
            comm.timeout = timeout
        try:
            return fn(comm, br, *args)
        finally:
            del comm  # before the resource it uses


def world(nranks: int, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
          run_dir: str | None = None, num_gpus: float = 0, **limits: Any) -> list[Any]:
    """Runs fn(comm, br, *args) on `nranks` new Ray actors, each a rank of one communicator
    with its BufferResource(**limits); returns their results in rank order. Connects to Ray
    (ray.init(), a local cluster when none is running) if not connected. `num_gpus`: what each
    actor asks Ray for. A rank that raises ends its actor's part: the others' waits on it
    raise CommError within the communicator's timeout, and the first error is raised here.
    The actors are killed afterwards (MPI cannot be joined twice in one process)."""
    ray = _ray()
    if nranks < 1:
        raise UsageError(f"ray ranks: {nranks} (at least 1)")
    if not _spillway.mpi_is_compiled():
        raise UsageError("spillway.ray needs spillway built with MPI")
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=True)
    own_dir = run_dir is None
    run_dir = tempfile.mkdtemp(prefix="spillway-ray-") if own_dir else run_dir
    env = {"SPILLWAY_RUN_NRANKS": str(nranks), "SPILLWAY_RUN_DIR": run_dir,
           "SPILLWAY_RUN_TOKEN": secrets.token_hex(8),
           # OpenMPI's session directories go with the run's directory.
           "OMPI_MCA_orte_tmpdir_base": run_dir}
    server = _start_ompi_server(run_dir, env) if nranks > 1 else None
    if server is not None:
        env["OMPI_MCA_pmix_server_uri"] = "file:" + os.path.join(run_dir, "ompi-server.uri")
    actor = ray.remote(num_cpus=0, num_gpus=num_gpus)(_Rank)
    ranks = [actor.remote() for _ in range(nranks)]
    try:
        refs = [a.run.remote(r, nranks, env, timeout, fn, args, limits)
                for r, a in enumerate(ranks)]
        results: list[Any] = [None] * nranks
        failed: list[BaseException] = []
        for r, ref in enumerate(refs):
            try:
                results[r] = ray.get(ref)
            except ray.exceptions.RayTaskError as e:  # the rank's own exception, unwrapped
                failed.append(e.cause if isinstance(e.cause, BaseException) else e)
            except ray.exceptions.RayError as e:  # its actor died
                failed.append(e)
        if failed:
            # The root cause first: a rank's own error rather than its peers' CommErrors.
            failed.sort(key=lambda e: isinstance(e, CommError))
            raise failed[0]
        return results
    finally:
        for a in ranks:
            ray.kill(a)
        if server is not None:
            server.kill()
            server.wait()
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def _start_ompi_server(run_dir: str, env: dict) -> subprocess.Popen:
    """OpenMPI's ompi-server, through which the ranks' MPI singletons connect (as spillway-run
    starts it), once it has written its URI."""
    if shutil.which("ompi-server") is None:
        raise UsageError("spillway.ray needs OpenMPI's ompi-server on PATH (Debian: openmpi-bin)")
    uri = os.path.join(run_dir, "ompi-server.uri")
    server = subprocess.Popen(["ompi-server", "--no-daemonize", "-r", uri],
                              env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if os.path.exists(uri) and os.path.getsize(uri) > 0:
            return server
        if server.poll() is not None:
            break
        time.sleep(0.01)
    server.kill()
    raise UsageError("ompi-server did not start (spillway.ray joins the ranks through it)")
