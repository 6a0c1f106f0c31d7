#!/usr/bin/env bash
# An Nsight Systems timeline of one command (CUDA and spillway's NVTX ranges), with the NVTX
# and kernel summaries printed. On the GPU machine nsys is not on the PATH and its importer
# lacks libdw.so.1: carry that library (and libelf.so.1, libbz2.so.1.0) in a folder named by
# NSYS_EXTRA_LIBS, e.g. from this machine's /usr/lib/x86_64-linux-gnu.
# Usage: [NSYS=...] [NSYS_EXTRA_LIBS=dir] scripts/nsys-timeline.sh OUTPUT_BASE COMMAND [ARGS...]
# Writes OUTPUT_BASE.nsys-rep (open it in Nsight Systems: each phase is a range in the
# "spillway" domain) and prints the summaries (NSYS_BUSY=1: and scripts/nsys-busy.py's).
set -euo pipefail
out=$1
shift
nsys=${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -1)}
[ -x "$nsys" ] || { echo "nsys-timeline: no nsys found (set NSYS)" >&2; exit 2; }
host=$(dirname "$(dirname "$nsys")")
"$nsys" profile -t cuda,nvtx -o "$out" --force-overwrite true "$@"
if [ ! -f "$out.nsys-rep" ] && [ -f "$out.qdstrm" ]; then
  # nsys could not run its importer: run it here, with the libraries it lacks.
  importer=$(ls "$host"/linux-desktop-*/QdstrmImporter | head -1)
  extra=$(realpath "${NSYS_EXTRA_LIBS:-.}")
  (cd "$(dirname "$importer")" &&
    LD_LIBRARY_PATH="$extra:$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./QdstrmImporter -i "$(realpath "$out.qdstrm")" |
      tr '\r' '\n' | grep -v '^Processing' || true)
  rm -f "$out.qdstrm"
fi
[ -f "$out.nsys-rep" ] || { echo "nsys-timeline: no report was made" >&2; exit 1; }
"$nsys" stats --force-export=true --report nvtx_sum,cuda_api_sum,cuda_gpu_kern_sum --format table "$out.nsys-rep"
# With NSYS_BUSY=1, also where the last run's time went per thread and stream (nsys-busy.py,
# from the SQLite export the summaries left beside the report).
if [ "${NSYS_BUSY:-0}" = 1 ]; then
  python3 "$(dirname "$0")/nsys-busy.py" "$out.sqlite"
fi
