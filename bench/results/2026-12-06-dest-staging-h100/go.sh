#!/bin/bash
# usage: BINS="a b" ROUNDS=n FILTER=regex CPUB=regex bash go.sh OUTDIR
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/o}; mkdir -p "$O"
export LD_LIBRARY_PATH=$Z/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "cpus $(nproc)"; lscpu | grep -E "Model name|NUMA node\(s\)"
for t in ${TESTS:-test_table_gpu test_table_pack}; do
  timeout 300 "$Z/$t" > "$O/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$O/$t.log" | head -5
done
for r in $(seq "${ROUNDS:-1}"); do
  for b in $BINS; do
    echo "== $b round $r"
    "$Z/bench_table_gpu-$b" --benchmark_filter="$FILTER" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true > "$O/$b-$r.txt" 2>&1
    grep -E "_median" "$O/$b-$r.txt" | sed -E 's/ +/ /g' | sed -E 's/bytes_per_second=[^ ]+ //'
  done
done
if [ -n "$CPUB" ]; then
  for r in $(seq "${CPUR:-1}"); do
    echo "== cpu round $r"
    "$Z/bench_table" --benchmark_filter="$CPUB" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true > "$O/cpu-$r.txt" 2>&1
    grep -E "_median" "$O/cpu-$r.txt" | sed -E 's/ +/ /g'
  done
fi
date -u
if [ -n "$NSYS" ]; then
  NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  echo "nsys: $NS"
  for f in $NSYS; do
    $NS profile -t cuda -o /tmp/ns-$RANDOM --force-overwrite true --stats=false "$Z/bench_table_gpu-new" --benchmark_filter="$f" --benchmark_repetitions=1 > /tmp/nsys.log 2>&1 || tail -5 /tmp/nsys.log
    R=$(ls -t /tmp/ns-*.nsys-rep | head -1)
    echo "== nsys $f"; $NS stats --report cuda_gpu_kern_sum --format csv "$R" 2>/dev/null | cut -d, -f1-4,9 | head -14
  done
fi
