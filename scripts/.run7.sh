set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/lib NCCL_NVLS_ENABLE=0
for t in .carry/new/tests/*; do timeout 200 $t --gtest_brief=1 > /tmp/$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$(basename $t).log | tr '\n' ' ')"; done
S="-C local --ranks 2 -c 10 -n 200000000 -p 1 -s -m pool -r 5 -w 2"
for o in 2 64 512; do for i in 1 2; do for b in new prev; do
  out=$(timeout 60 .carry/$b/tools/spillway-bench-shuffle $S -o $o 2>&1)
  echo "-o $o $b run $i: $(grep -oP '^means:.*?local throughput: \K[0-9.]+ [A-Za-z/]+' <<<"$out" | head -1) validated=$(grep -c validated <<<"$out")"
done; done; done
for i in 1 2; do for b in new prev; do
  out=$(timeout 60 .carry/$b/tools/spillway-bench-shuffle -C local --ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 2 -w 1 2>&1)
  echo "small chunks $b run $i: $(grep -oP '^means:.*?local throughput: \K[0-9.]+ [A-Za-z/]+' <<<"$out" | head -1) validated=$(grep -c validated <<<"$out")"
done; done
NSYS_EXTRA_LIBS=.carry/dw bash scripts/nsys-timeline.sh /tmp/o512 .carry/new/tools/spillway-bench-shuffle $S -o 512 -r 1 -w 1 > /tmp/o512.log 2>&1; echo "nsys rc=$?"
sed -n '/NVTX Range Summary/,/CUDA GPU Kernel/p' /tmp/o512.log | grep -v "^Processing\|^NOTICE\|It is assumed\|Consider using\|^$" | cut -c1-200 | head -24
