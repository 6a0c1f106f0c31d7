"""Run by test_interrupt.py: waits in a shuffle for a rank that never comes (a 300 s timeout)
until SIGINT arrives; prints how long the KeyboardInterrupt took to come out of the wait."""

import sys
import time

import pyarrow as pa

import spillway
from spillway import _spillway


def main():
    comms = _spillway.local_communicators(2)  # rank 1 never takes part
    comm = comms[0]
    comm.timeout = 300
    br = spillway.BufferResource(use_gpu=False)
    print("waiting", flush=True)
    t0 = time.monotonic()
    try:
        for _ in spillway.shuffle(pa.table({"k": [1, 2, 3]}), ["k"], comm, br):
            pass
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - t0:.2f} s", flush=True)
        return 0
    print("the wait ended without an interrupt", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
