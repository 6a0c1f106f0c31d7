set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
date -u
H=/opt/nvidia/nsight-compute/2025.3.1/host
N=$H/target-linux-x64/nsys
timeout 60 $N profile -t cuda,nvtx -o /tmp/prof --force-overwrite true .carry/gpu/tools/spillway-bench-shuffle -C local --ranks 2 -c 10 -n 20000000 -p 1 -o 64 -s -r 1 -w 1 > /tmp/prof.log 2>&1; tail -3 /tmp/prof.log
ls -la /tmp/prof*
(cd $H/linux-desktop-glibc_2_11_3-x64 && timeout 120 ./QdstrmImporter -i /tmp/prof.qdstrm 2>&1 | tail -5)
ls -la /tmp/prof*
if [ -f /tmp/prof.nsys-rep ]; then
  timeout 120 $N stats --report nvtx_sum,cuda_gpu_kern_sum --format table /tmp/prof.nsys-rep 2>&1 | head -60
  timeout 60 $N stats --report nvtx_gpu_proj_trace --format csv /tmp/prof.nsys-rep 2>&1 | head -5
  mkdir -p $OUT && cp /tmp/prof.nsys-rep $OUT/ 2>/dev/null
fi
for i in 1 2 3 4 5; do for b in gpu old; do
  out=$(timeout 60 .carry/$b/tools/spillway-bench-shuffle -C local --ranks 2 -c 10 -n 100000000 -p 4 -o 4 -s -r 3 -w 1 2>&1)
  echo "shuffle -l none $b run $i: $(grep -oP 'medians:.*?global throughput: \K[0-9.]+ [A-Za-z/]+' <<<"$out" | head -1) validated=$(grep -c validated <<<"$out")"
done; done
date -u
