set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib NCCL_NVLS_ENABLE=0
H=/opt/nvidia/nsight-compute/2025.3.1/host
N=$H/target-linux-x64/nsys
I=$H/linux-desktop-glibc_2_11_3-x64
LD_LIBRARY_PATH=$PWD/.carry/dw:$I ldd $I/QdstrmImporter | grep "not found"
timeout 60 $N profile -t cuda,nvtx -o /tmp/prof --force-overwrite true .carry/gpu/tools/spillway-bench-shuffle -C local --ranks 2 -c 10 -n 20000000 -p 1 -o 64 -s -r 1 -w 1 > /tmp/prof.log 2>&1
D=$PWD/.carry/dw; (cd $I && LD_LIBRARY_PATH=$D:$I timeout 150 ./QdstrmImporter -i /tmp/prof.qdstrm 2>&1 | tail -5)
ls -la /tmp/prof*
if [ -f /tmp/prof.nsys-rep ]; then
  timeout 120 $N stats --report nvtx_sum --format table /tmp/prof.nsys-rep 2>&1 | head -50
  timeout 120 $N stats --report cuda_gpu_kern_sum --format table /tmp/prof.nsys-rep 2>&1 | head -25
  cp /tmp/prof.nsys-rep $OUT/ 2>/dev/null
fi
