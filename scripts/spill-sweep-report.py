#!/usr/bin/env python3
"""The table and plot of a spill sweep (scripts/spill-sweep.sh) from its JSON files.

usage: spill-sweep-report.py OUTDIR [device|host]
Writes OUTDIR/sweep-TIER.md and, with matplotlib, OUTDIR/sweep-TIER.png. Figures are medians
over the timed runs; copy volumes and times are summed over all ranks (of the last run, the
one the statistics cover)."""
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
    for key, names in (("d2h", d2h), ("h2d", h2d), ("disk", disk)):
        out[key + "_bytes"] = stat(st, names, "bytes")
        out[key + "_s"] = stat(st, names, "seconds")
    out["recv_host"] = stat(st, ["recv-into-host-memory"], "bytes")
    out["pcie_h2d"] = d.get("pcie_h2d_gbps")
    out["pcie_d2h"] = d.get("pcie_d2h_gbps")
    out["pcie_all"] = (d.get("pcie_h2d_all_gbps"), d.get("pcie_d2h_all_gbps"))
    return out


MiB = 1 << 20


def mib(b):
    return f"{b / MiB:.0f}"


def rate(b, s):
    return f"{b / s / 1e9:.1f}" if s > 0 else "-"


def of_ceiling(b, s, ceiling):
    """The copy rate as a fraction of the PCIe ceiling measured in the same run."""
    return f"{b / s / 1e9 / ceiling:.2f}" if s > 0 and ceiling else "-"


def main():
    out = sys.argv[1]
    tier = sys.argv[2] if len(sys.argv) > 2 else "device"
    rows = [row(p) for p in glob.glob(os.path.join(out, f"sweep-{tier}-*.json"))]
    if not rows:
        sys.exit(f"no sweep-{tier}-*.json in {out}")
    rows.sort(key=lambda r: -(r["limit"] if r["limit"] is not None else float("inf")))
    peak_key = "peak_device" if tier == "device" else "peak_host"
    lines = [
        f"Input per rank: {mib(rows[0]['input'])} MiB. Sizes in MiB; copy volumes and times summed "
        "over the ranks (last run); throughputs are medians; / PCIe: the copy rate over the "
        "pinned <-> device ceiling measured at the start of the same run (rank 0's GPU alone).",
        "",
        f"| {tier} limit | valid | peak {tier} | peak / input | peak host "
        "| local GiB/s | local, runs | global GiB/s | D2H | D2H s | D2H GB/s | D2H / PCIe | H2D "
        "| H2D s | H2D GB/s | H2D / PCIe | to disk | recv-into-host |",
        "|" + "---|" * 18,
    ]
    ceilings = [(r["pcie_h2d"], r["pcie_d2h"], *r["pcie_all"]) for r in rows]
    if all(None not in c for c in ceilings):
        lines[1:1] = [
            "",
            "PCIe ceilings over the runs, GB/s (rank 0's GPU alone; every rank's GPU at once): "
            f"H2D {min(c[0] for c in ceilings):.1f}-{max(c[0] for c in ceilings):.1f}; "
            f"{min(c[2] for c in ceilings):.1f}-{max(c[2] for c in ceilings):.1f}, "
            f"D2H {min(c[1] for c in ceilings):.1f}-{max(c[1] for c in ceilings):.1f}; "
            f"{min(c[3] for c in ceilings):.1f}-{max(c[3] for c in ceilings):.1f}."]
    for r in rows:
        lim = "none" if r["limit"] is None else mib(r["limit"])
        lines.append(
            f"| {lim} | {'yes' if r['failed'] == 0 else 'NO'} | {mib(r[peak_key])} "
            f"| {r[peak_key] / r['input']:.2f} | {mib(r['peak_host'])} "
            f"| {r['local'] / GiB:.2f} "
            f"| {r['local_range'][0] / GiB:.0f}-{r['local_range'][1] / GiB:.0f} "
            f"| {r['global'] / GiB:.2f} "
            f"| {mib(r['d2h_bytes'])} | {r['d2h_s']:.3f} | {rate(r['d2h_bytes'], r['d2h_s'])} "
            f"| {of_ceiling(r['d2h_bytes'], r['d2h_s'], r['pcie_d2h'])} "
            f"| {mib(r['h2d_bytes'])} | {r['h2d_s']:.3f} | {rate(r['h2d_bytes'], r['h2d_s'])} "
            f"| {of_ceiling(r['h2d_bytes'], r['h2d_s'], r['pcie_h2d'])} "
            f"| {mib(r['disk_bytes'])} | {mib(r['recv_host'])} |")
    # Does throughput fall with the limit? A rise between neighbours whose runs overlap is
    # within the runs' spread (the same work, for limits above the peak without one).
    rises = []
    for hi, lo in zip(rows, rows[1:]):
        if lo["local"] > hi["local"]:
            within = lo["local_range"][0] <= hi["local_range"][1]
            rises.append(f"{'none' if hi['limit'] is None else mib(hi['limit'])} -> "
                         f"{mib(lo['limit'])} MiB ({hi['local'] / GiB:.1f} -> "
                         f"{lo['local'] / GiB:.1f} GiB/s, "
                         f"{'within' if within else 'beyond'} the runs' spread)")
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
