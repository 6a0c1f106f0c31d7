set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
date -u
LIMITS="none 1200" timeout 300 bash scripts/before-after.sh .carry/old .carry/gpu 3
for i in 1 2 3; do for b in old gpu; do
  out=$(timeout 60 .carry/$b/tools/spillway-bench-shuffle -C local --ranks 2 -c 10 -n 100000000 -p 1 -o 64 -s -r 3 -w 1 2>&1)
  echo "hashed -p 1 -o 64 $b run $i: $(grep -oP 'medians:.*?local throughput: \K[0-9.]+ [A-Za-z/]+' <<<"$out" | head -1) validated=$(grep -c validated <<<"$out")"
done; done
for i in 1 2; do for b in old gpu; do
  echo "== bench_table_gpu $b run $i"
  timeout 100 .carry/$b/bench/bench_table_gpu --benchmark_filter='BM_DeviceCopy|BM_PartitionAndPack/(2|64|1024|4096)/|BM_HashPartition/(64|1024)/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | grep -E "median" | awk '{print $1, $2, $3, $NF}'
done; done
N=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
ls /opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/ | head -30
find / -name "QdstrmImporter*" -o -name "nsys-ui*" 2>/dev/null | grep -v proc | head
timeout 90 $N profile -t cuda,nvtx -o /tmp/prof --force-overwrite true .carry/gpu/tools/spillway-bench-shuffle -C local --ranks 2 -c 4 -n 20000000 -p 1 -o 64 -s -r 2 -w 1 2>&1 | tail -8
ls -la /tmp/prof* 2>&1
date -u
