set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
G=/tmp/gc; mkdir -p $G
date -u
python3 -c "import sys; print(sys.version)"
for m in pyarrow cupy torch duckdb polars numpy tqdm mpi4py ray; do python3 -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1; done
SPILLWAY_BUILD=.carry/gpu OUT=$G timeout 400 bash scripts/gpu-check.sh tests > $G/check.log 2>&1; echo "gpu-check tests rc=$?"
sed -n '/^== tests ==/,$p' $G/check.log | grep -v "^elapsed" | grep -vE "^ - (alloc|event|shuffle|spill-device-freed)" | head -70
for t in test_comm_mpi test_shuffle_mpi; do timeout 200 mpirun --oversubscribe --bind-to none -np 2 .carry/gpu/tests/$t --gtest_color=no > $G/$t.log 2>&1; echo "$t np2 rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $G/$t.log | head -2 | tr '\n' ' ')"; done
timeout 60 .carry/gpu/tools/spillway-bench-comm -C local --ranks 2 -t device -s 16MiB -r 5 -w 2 2>&1 | tail -12
grep -l FAILED $G/*.log | head
for f in $(grep -l "FAILED\|rc=[1-9]" $G/*.log | head -3); do echo "== $f"; grep -B5 -A15 "FAILED\|Failure" $f | head -40; done
date -u
