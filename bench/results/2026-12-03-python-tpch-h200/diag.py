"""Where the TPC-H join's time goes: each join thread's calls into Python (source batches,
chunk handoffs) on a timeline, and rank 0's BufferResource report."""
import sys
import threading
import time

import spillway.join  # noqa: F401
J = sys.modules["spillway.join"]
import spillway.tpch  # noqa: F401
T = sys.modules["spillway.tpch"]

events = []
T0 = time.perf_counter()
orig_next, orig_out, orig_rank = J._Side.next, J._Handoff.out, T.rank_main


def timed_next(self):
    t0 = time.perf_counter()
    r = orig_next(self)
    events.append((threading.get_ident(), "src", t0, time.perf_counter(),
                   0 if r is None else r.num_rows))
    return r


def timed_out(self, pid, table):
    t0 = time.perf_counter()
    orig_out(self, pid, table)
    events.append((threading.get_ident(), "out", t0, time.perf_counter(), table.num_rows))


def rank_main(comm, br, *a):
    r = orig_rank(comm, br, *a)
    if comm.rank == 0:
        print(br.report())
    return r


J._Side.next, J._Handoff.out, T.rank_main = timed_next, timed_out, rank_main
T.main(sys.argv[1:])
for tid in sorted({e[0] for e in events}):
    ev = sorted([e for e in events if e[0] == tid], key=lambda e: e[2])
    t_first = ev[0][2]
    src = [e for e in ev if e[1] == "src"]
    out = [e for e in ev if e[1] == "out"]
    print(f"thread {tid}: {len(src)} source calls {sum(e[3]-e[2] for e in src):.3f} s, "
          f"{len(out)} chunks out {sum(e[3]-e[2] for e in out):.3f} s, "
          f"last source returned at +{src[-1][3]-t_first:.3f} s, first chunk at "
          f"+{(out[0][2]-t_first) if out else -1:.3f} s, last chunk at +{ev[-1][3]-t_first:.3f} s")
    print("  " + " ".join(f"{e[1]}@{e[2]-t_first:.3f}+{(e[3]-e[2])*1e3:.0f}ms/{e[4]}" for e in ev))
