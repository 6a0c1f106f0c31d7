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
    peak_key = "peak_device" if tier == "device" else "peak_host"
    lines = [
        f"Input per rank: {mib(rows[0]['input'])} MiB. Sizes in MiB. Throughputs are medians "
        "over the runs; copy volumes, times and rates (GB/s) too, each run's summed over its "
        "ranks (the rates' range over the runs in brackets). / PCIe: the copy rate over the "
        "pinned <-> device ceiling measured at the start of the same run (rank 0's GPU alone). "
        "Pinned growth: the time the slower rank's allocations spent growing the pinned pool, "
        "median over the runs (the most in one run).",
        "",
        f"| {tier} limit | valid | peak {tier} | peak / input | peak host "
        "| local GiB/s | local, runs | global GiB/s | D2H | D2H s | D2H GB/s | D2H / PCIe | H2D "
        "| H2D s | H2D GB/s | H2D / PCIe | pinned growth ms | to disk | recv-into-host |",
        "|" + "---|" * 19,
    ]
    ceilings = [(r["pcie_h2d"], r["pcie_d2h"], *r["pcie_all"], *r["pcie_duplex"]) for r in rows]
    if all(None not in c for c in ceilings):
        def span(i):
            return f"{min(c[i] for c in ceilings):.1f}-{max(c[i] for c in ceilings):.1f}"
        lines[1:1] = [
            "",
            "PCIe ceilings over the runs, GB/s (rank 0's GPU alone; every rank's GPU at once; "
            f"every GPU both ways at once): H2D {span(0)}; {span(2)}; {span(4)}, "
            f"D2H {span(1)}; {span(3)}; {span(5)}."]
    for r in rows:
        lim = "none" if r["limit"] is None else mib(r["limit"])
        lines.append(
            f"| {lim} | {'yes' if r['failed'] == 0 else 'NO'} | {mib(r[peak_key])} "
            f"| {r[peak_key] / r['input']:.2f} | {mib(r['peak_host'])} "
            f"| {r['local'] / GiB:.2f} "
            f"| {r['local_range'][0] / GiB:.0f}-{r['local_range'][1] / GiB:.0f} "
            f"| {r['global'] / GiB:.2f} "
            f"| {mib(r['d2h_bytes'])} | {r['d2h_s']:.3f} | {rate(r, 'd2h')} "
            f"| {of_ceiling(r['d2h_gbps'], r['pcie_d2h'])} "
            f"| {mib(r['h2d_bytes'])} | {r['h2d_s']:.3f} | {rate(r, 'h2d')} "
            f"| {of_ceiling(r['h2d_gbps'], r['pcie_h2d'])} "
            f"| {r['grow_ms']} "
            f"| {mib(r['disk_bytes'])} | {mib(r['recv_host'])} |")
    # Does throughput fall with the limit? A rise between neighbours whose runs overlap is
    # within the runs' spread; between limits where no run moved a byte off the top tier it is
    # the same work (each limit is a process of its own: their order is noise).
    rises = []
    for hi, lo in zip(rows, rows[1:]):
        if lo["local"] > hi["local"]:
            within = lo["local_range"][0] <= hi["local_range"][1]
            same = not hi["moved"] and not lo["moved"]
            rises.append(f"{'none' if hi['limit'] is None else mib(hi['limit'])} -> "
                         f"{mib(lo['limit'])} MiB ({hi['local'] / GiB:.1f} -> "
                         f"{lo['local'] / GiB:.1f} GiB/s, "
                         f"{'within' if within else 'beyond'} the runs' spread"
                         f"{'; the same work: no run moved a byte off the top tier' if same else ''})")
    lines += ["", "Local throughput (medians) never rises as the limit falls."
              if not rises else "Local throughput (medians) rises: " + "; ".join(rises) + "."]
    md = os.path.join(out, f"sweep-{tier}.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot; pip install matplotlib)")
        return
    limited = [r for r in rows if r["limit"] is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [r["limit"] / GiB for r in limited]
    ax.plot(xs, [r["local"] / GiB for r in limited], "o-", label="local throughput")
    ax.plot(xs, [r["global"] / GiB for r in limited], "s-", label="global throughput")
    for r in rows:
        if r["limit"] is None:
            ax.axhline(r["global"] / GiB, ls="--", c="gray", label="global, no limit")
    ax.axvline(rows[0]["input"] / GiB, ls=":", c="k", label="input per rank")
    ax.set_xlabel(f"{tier} limit per rank (GiB)")
    ax.set_ylabel("GiB/s")
    ax.invert_xaxis()
    ax.legend()
    ax.set_title("spillway-bench-shuffle spill sweep")
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"sweep-{tier}.png"), dpi=120)


if __name__ == "__main__":
    main()
