set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib NCCL_NVLS_ENABLE=0
NSYS_EXTRA_LIBS=.carry/dw bash scripts/nsys-timeline.sh /tmp/o512 .carry/gpu/tools/spillway-bench-shuffle -C local --ranks 2 -c 10 -n 200000000 -p 1 -o 512 -s -m pool -r 1 -w 1 > /tmp/o512.log 2>&1; echo "rc=$?"
grep -E "^means|^elapsed" /tmp/o512.log
sed -n '/NVTX Range Summary/,$p' /tmp/o512.log | grep -v "^Processing\|^NOTICE\|It is assumed\|Consider using" | cut -c1-230 | head -90
cp /tmp/o512.nsys-rep $OUT/
