"""spillway: move large columnar data between ranks without running out of memory.

    import pyarrow as pa, spillway

    def rank(comm, br):
        table = pa.table({"key": [1, 2, 3], "value": [4.0, 5.0, 6.0]})
        return {pid: part for pid, part in spillway.shuffle(table, ["key"], comm, br)}

    parts = spillway.comm.local(2, rank, host_limit="1GiB")   # one result per rank

Tables go in through the Arrow PyCapsule interface (pyarrow, Polars, DuckDB results) and come
out as pyarrow Tables; fixed-width columns also go in and out through DLPack (PyTorch, CuPy,
NumPy), on the GPU without a copy through the host: `spillway.from_dlpack({...}, br)`,
`table.column("a")`. Every C++ error is one of spillway.errors' classes.
"""

from . import _spillway
from . import errors


def _keep_ctrl_c() -> None:
    """libfabric's shm provider puts a C handler of its own on SIGINT when the extension loads
    it, under Python's: Ctrl-C then ends the process instead of raising KeyboardInterrupt.
    Python's handler is put back (from the main thread, where Python takes signals)."""
    import signal
    import threading
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, signal.default_int_handler)


_keep_ctrl_c()
from .errors import (CommError, CorruptDataError, CudaError, IoError, OutOfMemory,
                     SpillwayError, UsageError)

_spillway._register_errors({name: getattr(errors, name) for name in (
    "OutOfMemory", "CommError", "IoError", "CorruptDataError", "CudaError", "UsageError")})

from ._spillway import BufferResource, Communicator, Shuffler, Table  # noqa: E402
from .tables import ColumnArray, column, from_arrow, from_dlpack, to_arrow  # noqa: E402
from .tier import Tier  # noqa: E402

Table.column = column  # t.column('a'): a DLPack / CUDA array view of one column
from .shuffle import shuffle  # noqa: E402
from .join import hash_join, join  # noqa: E402
from .groupby import groupby  # noqa: E402
from .sort import sort  # noqa: E402
from . import streaming  # noqa: E402
from . import comm  # noqa: E402
from . import ray  # noqa: E402  (imports Ray only when used)

__version__ = _spillway.__version__


def cuda_available() -> bool:
    """Whether a GPU is usable here (a CUDA build on a machine with a GPU)."""
    return _spillway.cuda_available()


def settings() -> dict:
    """Every SPILLWAY_* setting and its current value (as `spillway-settings` prints them)."""
    return _spillway.settings()


def _variable(name: str) -> str:
    name = name.upper()
    return name if name.startswith("SPILLWAY_") else "SPILLWAY_" + name


def setting(name: str) -> str:
    """The current value of one setting, by its variable (SPILLWAY_MEMORY_WAIT_MS) or its name
    without the prefix (memory_wait_ms)."""
    return _spillway.setting(_variable(name))


def set_setting(name: str, value: object) -> None:
    """Sets one setting for this process, by its variable or its name without the prefix; the
    value is checked as the environment's would be (a bad one is a UsageError naming the
    variable). True and False are "1" and "0"."""
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    _spillway.set_setting(_variable(name), text)


__all__ = ["BufferResource", "Communicator", "Shuffler", "Table", "from_arrow", "to_arrow",
           "from_dlpack", "column", "ColumnArray",
           "shuffle", "join", "hash_join", "groupby", "sort", "streaming", "comm", "ray", "cuda_available", "settings",
           "setting", "set_setting", "Tier", "errors", "SpillwayError",
           "OutOfMemory", "CommError", "IoError", "CorruptDataError", "CudaError", "UsageError",
           "__version__"]
