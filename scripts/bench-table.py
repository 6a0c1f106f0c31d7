#!/usr/bin/env python3
"""Prints the medians of a bench_memory or bench_table_gpu JSON file (Google Benchmark) as a Markdown table."""
import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    rows = [b for b in data["benchmarks"] if b.get("aggregate_name", "median") == "median"
            and b.get("run_type") != "iteration" or "aggregate_name" not in b]
    rows = [b for b in rows if b.get("aggregate_name") in (None, "median")]
    print("| benchmark | figure | ceiling / peer (same run) | ratio |")
    print("|---|---|---|---|")
    seen = set()
    for b in rows:
        name = b["run_name"] if "run_name" in b else b["name"]
        name = name.replace("/min_time:0.500", "").replace("/manual_time", "")
        if name in seen:
            continue
        seen.add(name)
        if b.get("error_occurred"):
            print(f"| {name} | skipped: {b.get('error_message', '')} | | |")
            continue
        if "GB/s" in b:
            peers = {"ceil_GB/s": "raw cudaMemcpyAsync", "dd_GB/s": "dd", "memcpy_GB/s": "raw memcpy"}
            ceil_key = next((k for k in peers if k in b), None)
            ceiling = f"{b[ceil_key]:.2f} GB/s ({peers[ceil_key]})" if ceil_key else ""
            ratio = f"{b['ratio']:.2f}" if b.get("ratio") else ""
            if "vs_55.3" in b:
                ratio += f"; {b['vs_55.3']:.2f} of 55.3 GB/s PCIe"
            print(f"| {name} | {b['GB/s']:.2f} GB/s | {ceiling} | {ratio} |")
        elif "TB/s" in b:
            extra = f"; peak extra {b['peak_extra']:.2f}x input" if "peak_extra" in b else ""
            print(f"| {name} | {b['TB/s']:.3f} TB/s | {b['copy_TB/s']:.3f} TB/s (device copy) | "
                  f"{b['fraction']:.2f}{extra} |")
        elif "raw_ns" in b:
            ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
            print(f"| {name} | {ns / 1e3:.2f} us | {b['raw_ns'] / 1e3:.2f} us (raw allocator) | "
                  f"{b['raw_ns'] / ns:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
