#!/usr/bin/env python3
"""Where the time of one run went, from an Nsight Systems SQLite export (nsys-timeline.sh
writes one beside the report with NSYS_SQLITE=1): per host thread, its CUDA API and NVTX time;
per GPU stream, its kernel and copy time; and both in ten slices of the run, to see which one
was busy all along (the critical path) and which waited.

Usage: scripts/nsys-busy.py TRACE.sqlite [RANGE [COUNT]]
The run is the window from the start of the first of the last COUNT instances of the NVTX range
RANGE (default "partition and pack", COUNT 2: one per rank of a two-rank shuffle) to
the end of the trace's last NVTX range or GPU activity."""
import sqlite3
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    anchor = sys.argv[2] if len(sys.argv) > 2 else "partition and pack"
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    db = sqlite3.connect(path)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    nvtx = [
        (s, e, t if t is not None else names.get(i, "?"), g)
        for s, e, t, i, g in db.execute(
            "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE end IS NOT NULL"
        )
    ]
    starts = sorted(s for s, e, t, g in nvtx if t == anchor)
    if len(starts) < count:
        sys.exit(f"nsys-busy: fewer than {count} ranges named {anchor!r}")
    t0 = starts[-count]
    gpu = []
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
                        ("CUPTI_ACTIVITY_KIND_MEMCPY", "copy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table in tables:
            gpu += [(s, e, kind, st) for s, e, st in
                    db.execute(f"SELECT start, end, streamId FROM {table} WHERE end > ?", (t0,))]
    t1 = max([e for s, e, t, g in nvtx] + [e for s, e, k, st in gpu])
    span = t1 - t0
    thread_names = {g: names.get(n, "?") for n, g in db.execute(
        "SELECT nameId, globalTid FROM ThreadNames")} if "ThreadNames" in tables else {}
    api = [(s, e, names.get(n, "?"), g) for s, e, n, g in db.execute(
        "SELECT start, end, nameId, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE end > ? "
        "AND start < ?", (t0, t1))]

    def clip(s, e, a=t0, b=t1):
        return max(0, min(e, b) - max(s, a))

    print(f"window: {span / 1e6:.2f} ms from the {count}th-last {anchor!r}")
    threads = defaultdict(lambda: defaultdict(float))
    for s, e, n, g in api:
        threads[g]["api " + n] += clip(s, e)
    for s, e, t, g in nvtx:
        if e > t0 and s < t1:
            threads[g]["nvtx " + t] += clip(s, e)
    print("\nper host thread (ms inside the window; NVTX ranges nest, so they overlap):")
    for g, d in sorted(threads.items(), key=lambda kv: -sum(v for k, v in kv[1].items()
                                                             if k.startswith("api"))):
        total_api = sum(v for k, v in d.items() if k.startswith("api"))
        if total_api < 0.01 * span and not any(k.startswith("nvtx") for k in d):
            continue
        print(f"  thread {g & 0xffffff} {thread_names.get(g, '')}: CUDA API {total_api / 1e6:.1f} ms")
        for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:10]:
            print(f"      {v / 1e6:8.2f} ms  {k}")
    streams = defaultdict(lambda: defaultdict(float))
    for s, e, k, st in gpu:
        streams[st][k] += clip(s, e)
        streams[st][k + "s"] += 1
    print("\nper GPU stream (ms of activity inside the window, count):")
    for st, d in sorted(streams.items(), key=lambda kv: -(kv[1]["kernel"] + kv[1]["copy"])):
        print(f"  stream {st}: " + ", ".join(f"{k} {d[k] / 1e6:.2f} ms ({int(d[k + 's'])})"
                                          for k in ("kernel", "copy", "memset") if d[k + "s"]))
    print("\nbusy % per tenth of the window (host threads: CUDA API; streams: GPU work):")
    slices = 10
    edges = [t0 + span * i // slices for i in range(slices + 1)]
    rows = []
    for g in threads:
        b = [sum(clip(s, e, edges[i], edges[i + 1]) for s, e, n, gg in api if gg == g)
             for i in range(slices)]
        if sum(b) > 0.02 * span:
            rows.append((f"thread {g & 0xffffff}", b))
    for st in streams:
        b = [sum(clip(s, e, edges[i], edges[i + 1]) for s, e, k, x in gpu if x == st)
             for i in range(slices)]
        if sum(b) > 0.01 * span:
            rows.append((f"stream {st}", b))
    for label, b in rows:
        print(f"  {label:>16}: " + " ".join(f"{100 * v / (span / slices):4.0f}" for v in b))


if __name__ == "__main__":
    main()
