#!/usr/bin/env python3
"""The table and plot of a spill sweep (scripts/spill-sweep.sh) from its JSON files.

usage: spill-sweep-report.py OUTDIR [device|host]
Writes OUTDIR/sweep-TIER.md and, with matplotlib, OUTDIR/sweep-TIER.png. Figures are medians
over the timed runs; a run's copy volume, time and rate are its ranks' summed; the disk and
recv-into-host volumes are of the last run (the one the statistics cover)."""
import glob
import json
import os
import statistics
import sys

GiB = 1 << 30


def stat(stats, names, field):
    return sum(s["stats"].get(n, {}).get(field, 0) for s in stats for n in names)


def row(path):
    with open(path) as f:
        d = json.load(f)
    runs = d["runs"]
    per_rank = d["input_bytes_per_rank"]
    n = d["nranks"]
    mine = [r[0]["seconds"] for r in runs]
    slowest = [max(x["seconds"] for x in r) for r in runs]
    peak = max(x["peak_device"] for r in runs for x in r)
    peak_host = max(x["peak_host"] for r in runs for x in r)
    st = d["statistics"]
    d2h = ["copy-device-to-pinned_host", "copy-device-to-host"]
    h2d = ["copy-pinned_host-to-device", "copy-host-to-device"]
    disk = ["copy-pinned_host-to-disk", "copy-host-to-disk", "copy-device-to-disk"]
    limit = d["device_limit"] if d["gpu"] else d["host_limit"]
    out = {
        "limit": limit,
        "failed": d["failed_runs"],
        "peak_device": peak,
        "peak_host": peak_host,
        "input": per_rank,
        "local": per_rank / statistics.median(mine),
        "local_range": (per_rank / max(mine), per_rank / min(mine)),
        "global": per_rank * n / statistics.median(slowest),
    }
    for key in ("d2h", "h2d"):
        # Per run, over the ranks: the volume, the time, the rate; medians over the runs.
        names = d2h if key == "d2h" else h2d
        per_run = list(zip(*d["run_statistics"]))  # [run][rank]
        b = [stat([{"stats": x} for x in r], names, "bytes") for r in per_run]
        s = [stat([{"stats": x} for x in r], names, "seconds") for r in per_run]
        rates = [bi / si / 1e9 for bi, si in zip(b, s) if si > 0]
        out[key + "_bytes"] = statistics.median(b)
        out[key + "_s"] = statistics.median(s)
        out[key + "_gbps"] = statistics.median(rates) if rates else None
        out[key + "_gbps_range"] = (min(rates), max(rates)) if rates else None
    # The pinned pool's growth (pages pinned while data lands): per run, the slower rank's.
    grow = [max(x.get("alloc-pinned_host-grow", {}).get("seconds", 0) for x in r)
            for r in zip(*d["run_statistics"])]
    out["grow_ms"] = f"{statistics.median(grow) * 1e3:.0f} ({max(grow) * 1e3:.0f})" if d["gpu"] else "-"
    out["disk_bytes"] = stat(st, disk, "bytes")
    # Whether any run moved a byte off the top tier (landed, spilled or copied down).
    off = d2h + disk + ["recv-into-host-memory"]
    out["moved"] = any(stat([{"stats": x} for x in r], off, "bytes") > 0
                       for r in zip(*d["run_statistics"]))
    out["recv_host"] = stat(st, ["recv-into-host-memory"], "bytes")
    out["pcie_h2d"] = d.get("pcie_h2d_gbps")
    out["pcie_d2h"] = d.get("pcie_d2h_gbps")
    out["pcie_all"] = (d.get("pcie_h2d_all_gbps"), d.get("pcie_d2h_all_gbps"))
    out["pcie_duplex"] = (d.get("pcie_h2d_duplex_gbps"), d.get("pcie_d2h_duplex_gbps"))
    return out


MiB = 1 << 20


def mib(b):
    return f"{b / MiB:.0f}"


def rate(r, key):
    """The median of the runs' copy rates, and their range."""
    g = r[key + "_gbps"]
    if g is None:
        return "-"
    lo, hi = r[key + "_gbps_range"]
    return f"{g:.1f} ({lo:.1f}-{hi:.1f})"


def of_ceiling(gbps, ceiling):
    """The copy rate as a fraction of a PCIe ceiling measured in the same run."""
    return f"{gbps / ceiling:.2f}" if gbps is not None and ceiling else "-"


def main():
    out = sys.argv[1]
    tier = sys.argv[2] if len(sys.argv) > 2 else "device"
    rows = [row(p) for p in glob.glob(os.path.join(out, f"sweep-{tier}-*.json"))]
    if not rows:
        sys.exit(f"no sweep-{tier}-*.json in {out}")
    rows.sort(key=lambda r: -(r["limit"] if r["limit"] is not None else float("inf")))
    gpu = tier == "device"
    peak_key = "peak_device" if gpu else "peak_host"
    # Each column once: its header and its cell. The GPU copy columns only where there is a GPU.
    columns = [
        (f"{tier} limit", lambda r: "none" if r["limit"] is None else mib(r["limit"])),
        ("valid", lambda r: "yes" if r["failed"] == 0 else "NO"),
        (f"peak {tier}", lambda r: mib(r[peak_key])),
        ("peak / input", lambda r: f"{r[peak_key] / r['input']:.2f}"),
    ]
    if gpu:
        columns.append(("peak host", lambda r: mib(r["peak_host"])))
    columns += [
        ("local GiB/s", lambda r: f"{r['local'] / GiB:.2f}"),
        ("local, runs", lambda r: f"{r['local_range'][0] / GiB:.2f}-{r['local_range'][1] / GiB:.2f}"),
        ("global GiB/s", lambda r: f"{r['global'] / GiB:.2f}"),
    ]
    if gpu:
        columns += [
            ("D2H", lambda r: mib(r["d2h_bytes"])),
            ("D2H s", lambda r: f"{r['d2h_s']:.3f}"),
            ("D2H GB/s", lambda r: rate(r, "d2h")),
            ("D2H / PCIe", lambda r: of_ceiling(r["d2h_gbps"], r["pcie_d2h"])),
            ("H2D", lambda r: mib(r["h2d_bytes"])),
            ("H2D s", lambda r: f"{r['h2d_s']:.3f}"),
            ("H2D GB/s", lambda r: rate(r, "h2d")),
            ("H2D / PCIe", lambda r: of_ceiling(r["h2d_gbps"], r["pcie_h2d"])),
            ("pinned growth ms", lambda r: r["grow_ms"]),
        ]
    columns += [
        ("to disk", lambda r: mib(r["disk_bytes"])),
        ("recv-into-host", lambda r: mib(r["recv_host"])),
    ]
    intro = (f"Input per rank: {mib(rows[0]['input'])} MiB. Sizes in MiB. Throughputs are "
             "medians over the runs (their range in 'local, runs').")
    if gpu:
        intro += (" Copy volumes, times and rates (GB/s) are medians too, each run's summed over "
                  "its ranks (the rates' range over the runs in brackets). / PCIe: the copy rate "
                  "over the pinned <-> device ceiling measured at the start of the same run "
                  "(rank 0's GPU alone). Pinned growth: the time the slower rank's allocations "
                  "spent growing the pinned pool, median over the runs (the most in one run).")
    lines = [
        intro,
        "",
        "| " + " | ".join(c[0] for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    ceilings = [(r["pcie_h2d"], r["pcie_d2h"], *r["pcie_all"], *r["pcie_duplex"]) for r in rows]
    if gpu and all(None not in c for c in ceilings):
        def span(i):
            return f"{min(c[i] for c in ceilings):.1f}-{max(c[i] for c in ceilings):.1f}"
        lines[1:1] = [
            "",
            "PCIe ceilings over the runs, GB/s (rank 0's GPU alone; every rank's GPU at once; "
            f"every GPU both ways at once): H2D {span(0)}; {span(2)}; {span(4)}, "
            f"D2H {span(1)}; {span(3)}; {span(5)}."]
    for r in rows:
        lines.append("| " + " | ".join(c[1](r) for c in columns) + " |")
    # Does throughput fall with the limit? A rise between neighbours whose runs overlap is
    # within the runs' spread; between limits where no run moved a byte off the top tier it is
    # the same work (each limit is a process of its own: their order is noise).
    rises = []
    for hi, lo in zip(rows, rows[1:]):
        if lo["local"] > hi["local"]:
            within = lo["local_range"][0] <= hi["local_range"][1]
            same = not hi["moved"] and not lo["moved"]
            rises.append(f"{'none' if hi['limit'] is None else mib(hi['limit'])} -> "
                         f"{mib(lo['limit'])} MiB ({hi['local'] / GiB:.2f} -> "
                         f"{lo['local'] / GiB:.2f} GiB/s, "
                         f"{'within' if within else 'beyond'} the runs' spread"
                         f"{'; the same work: no run moved a byte off the top tier' if same else ''})")
    lines += ["", "Local throughput (medians) never rises as the limit falls."
              if not rises else "Local throughput (medians) rises: " + "; ".join(rises) + "."]
    md = os.path.join(out, f"sweep-{tier}.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(rows, tier, os.path.join(out, f"sweep-{tier}.png"))


def plot(rows, tier, path):
    """Two panels: throughput against the limit on a log scale (so that the runs far below the
    input size stay readable), and what the limit costs in copies: on the GPU the copy rates
    over the PCIe ceiling of the same run, on the CPU the bytes written to disk."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot; scripts/spill-sweep.sh installs it)")
        return
    limited = [r for r in rows if r["limit"] is not None]
    fig, (ax, cx) = plt.subplots(1, 2, figsize=(11, 4.2))
    unit, per = ("GiB", GiB) if rows[0]["input"] >= GiB else ("MiB", MiB)
    xs = [r["limit"] / per for r in limited]
    ax.plot(xs, [r["local"] / GiB for r in limited], "o-", label="local throughput")
    ax.plot(xs, [r["global"] / GiB for r in limited], "s-", label="global throughput")
    lo = [r["local_range"][0] / GiB for r in limited]
    hi = [r["local_range"][1] / GiB for r in limited]
    ax.fill_between(xs, lo, hi, alpha=0.2, label="local, range over the runs")
    for r in rows:
        if r["limit"] is None:
            ax.axhline(r["local"] / GiB, ls="--", c="gray", label="local, no limit")
    ax.axvline(rows[0]["input"] / per, ls=":", c="k", label="input per rank")
    ax.set_yscale("log")
    ax.set_xlabel(f"{tier} limit per rank ({unit})")
    ax.set_ylabel("GiB/s (log scale)")
    ax.invert_xaxis()
    ax.legend(fontsize=8)
    ax.set_title("throughput")
    if tier == "device":
        for key, name, ceiling in (("h2d", "host -> device", "pcie_h2d"),
                                   ("d2h", "device -> host", "pcie_d2h")):
            pts = [(r["limit"] / per, r[key + "_gbps"] / r[ceiling]) for r in limited
                   if r[key + "_gbps"] is not None and r[ceiling]]
            if pts:
                cx.plot(*zip(*pts), "o-", label=f"{name} / PCIe ceiling")
        cx.axhline(1.0, ls="--", c="gray", label="PCIe ceiling (same run)")
        cx.axhline(0.9, ls=":", c="gray", label="0.9 of it")
        cx.set_ylim(0, 1.1)
        cx.set_ylabel("copy rate / ceiling")
        cx.set_title("GPU <-> host copies (medians over the runs)")
    else:
        cx.plot(xs, [r["disk_bytes"] / (1 << 20) for r in limited], "o-",
                label="written to disk (last run)")
        cx.set_ylabel("MiB")
        cx.set_title("spilled to disk per rank")
    cx.set_xlabel(f"{tier} limit per rank ({unit})")
    cx.invert_xaxis()
    cx.legend(fontsize=8)
    fig.suptitle("spillway-bench-shuffle spill sweep")
    fig.tight_layout()
    fig.savefig(path, dpi=120)

if __name__ == "__main__":
    main()
