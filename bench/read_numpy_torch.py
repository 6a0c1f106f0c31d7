#!/usr/bin/env python3
"""The baseline of spillway-readspeed --target device: what a Python user writes to get a file
into GPU memory, numpy.fromfile then torch.from_numpy(...).cuda(), timed the same way
(median of several runs, the file in the page cache, synchronized).

usage: read_numpy_torch.py FILE [RUNS]"""
import statistics
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    sys.exit("read_numpy_torch.py: needs torch (pip install torch) and a GPU")


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if not torch.cuda.is_available():
        sys.exit("read_numpy_torch.py: no GPU")
    times = []
    for _ in range(runs + 1):  # the first warms CUDA up
        t0 = time.perf_counter()
        a = np.fromfile(path, dtype=np.uint8)
        t = torch.from_numpy(a).cuda()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        del a, t
    med = statistics.median(times[1:])
    size = np.fromfile(path, dtype=np.uint8, count=0).nbytes or __import__("os").path.getsize(path)
    print(f"numpy.fromfile + torch.from_numpy().cuda(): {size / med / 1e9:.2f} GB/s "
          f"(median of {runs}, {med:.3f} s for {size / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
