#!/usr/bin/env python3
"""The peer of bench_table_gpu's partition_and_pack: what a PyTorch user writes to hash-partition
a table on the GPU. The same shape (32 Mi rows of 10 int32 columns, the key column 0), a
multiplicative hash of the key modulo the partition count, a stable argsort of the partition
ids and a gather (index_select) of every column by that order, with bincount for the
partition sizes. Timed with CUDA events, medians of RUNS after a warm-up, and printed as a
fraction of a device-to-device copy of the same bytes in the same run (bytes read + written),
as bench_table_gpu prints its own.

usage: partition_torch.py [RUNS] [PARTITIONS...]"""
import statistics
import sys

try:
    import torch
except ImportError:
    sys.exit("partition_torch.py: needs torch (pip install torch) and a GPU")


def timed(fn, runs):
    fn()  # warm-up
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    parts_list = [int(a) for a in sys.argv[2:]] or [2, 8, 64, 1024, 4096]
    if not torch.cuda.is_available():
        sys.exit("partition_torch.py: no GPU")
    rows, ncols = 1 << 25, 10
    g = torch.Generator(device="cuda").manual_seed(42)
    cols = [torch.randint(-(2**31), 2**31 - 1, (rows,), dtype=torch.int32, device="cuda",
                          generator=g) for _ in range(ncols)]
    nbytes = rows * ncols * 4
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_s = timed(lambda: dst.copy_(src), runs)
    copy_tbps = 2 * nbytes / copy_s / 1e12
    print(f"device copy: {copy_tbps:.2f} TB/s (read + write, median of {runs})")
    print("| partitions | torch argsort + gather (ms) | TB/s | fraction of the copy |")
    print("|---|---|---|---|")
    key = cols[0].to(torch.int64) & 0xFFFFFFFF
    for parts in parts_list:
        def op():
            pid = ((key * 2654435761) & 0xFFFFFFFF) % parts
            order = torch.argsort(pid, stable=True)
            sizes = torch.bincount(pid, minlength=parts)
            out = [c.index_select(0, order) for c in cols]
            return sizes, out
        s = timed(op, runs)
        tbps = 2 * nbytes / s / 1e12
        print(f"| {parts} | {s * 1e3:.2f} | {tbps:.3f} | {tbps / copy_tbps:.3f} |")


if __name__ == "__main__":
    main()
