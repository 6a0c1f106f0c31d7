"""spillway's errors: each C++ error kind becomes one of these, with the same message."""


class SpillwayError(RuntimeError):
    """Base of every error spillway raises."""


class OutOfMemory(SpillwayError, MemoryError):
    """A limit could not be met even after spilling; the message names the step and tiers."""


class CommError(SpillwayError):
    """A peer is gone or did not answer within the communicator's timeout."""


class IoError(SpillwayError, OSError):
    """A file could not be read or written (the disk is full, a spill file is corrupt)."""


class CorruptDataError(SpillwayError, ValueError):
    """Bytes from another process or a file do not describe what they claim to."""


class CudaError(SpillwayError):
    """A CUDA call failed."""


class UsageError(SpillwayError, ValueError):
    """An argument spillway cannot use (a bad limit, rank, column, or a call out of order)."""
