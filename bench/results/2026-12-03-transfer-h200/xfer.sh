#!/usr/bin/env bash
# On the GPU machine: the transfer engine's cuda_ipc benchmark with trace timings.
# Usage: bash .carry/xfer.sh MODE...   MODE: trace | bench | copy
set -u
X=$PWD/.carry/xfer
export LD_LIBRARY_PATH=$X
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt; date -u >> $OUT/machine.txt
for m in "$@"; do
  case $m in
  trace)
    for dst in device pinned; do
      SPILLWAY_LOG_LEVEL=trace timeout 120 $X/spillway-bench-transfer --backend cuda_ipc --src device --dst $dst --chunk ${CHUNKS:-4KiB,64KiB,1MiB} -r 3 -w 1 > $OUT/trace-$dst${SUF:-}.out 2> $OUT/trace-$dst${SUF:-}.err
      echo "trace $dst rc=$?"; cat $OUT/trace-$dst${SUF:-}.out
    done ;;
  bench)
    for i in 1 2 3; do for dst in pinned device; do
      timeout 120 $X/spillway-bench-transfer --backend cuda_ipc --src device --dst $dst --verify -r 5 > /tmp/bench-$dst-$i.out 2>&1
      echo "bench $dst $i rc=$?"; cat /tmp/bench-$dst-$i.out >> $OUT/bench.log; grep -v "^spillway\|^chunk" /tmp/bench-$dst-$i.out
    done; done ;;
  knobs)
    for rep in 1 2; do for cfg in ${CFGS:-base zc inline spin first all}; do
      E="SPILLWAY_EXP_INLINE_POST=0"
      case $cfg in
        zc) E="$E SPILLWAY_EXP_IPC_ZEROCOPY=1";;
        inline) E="SPILLWAY_EXP_INLINE_POST=1";;
        spin) E="$E SPILLWAY_EXP_SPIN_US=200";;
        first) E="$E SPILLWAY_EXP_FIRST_PART=256";;
        all) E="SPILLWAY_EXP_INLINE_POST=1 SPILLWAY_EXP_IPC_ZEROCOPY=1 SPILLWAY_EXP_SPIN_US=200 SPILLWAY_EXP_FIRST_PART=256";;
      esac
      for dst in device pinned; do
        env $E timeout 120 $X/spillway-bench-transfer --backend cuda_ipc --src device --dst $dst -r 5 -w 1 > $OUT/knobs-$cfg-$dst-$rep.out 2>&1
        echo "== $cfg $dst rep$rep rc=$?"; grep -v "^spillway\|^chunk" $OUT/knobs-$cfg-$dst-$rep.out | awk '{print $1$2, $6, $10, $11}'
      done
    done; done ;;
  test)
    for t in test_transfer_cuda_ipc test_transfer_engine test_comm_transfer; do
      (cd $X && timeout 300 ./$t > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$t.log | tr '\n' ' ')")
    done ;;
  copy)
    timeout 120 $X/bench_ipc_copy > $OUT/copy.out 2>&1; echo "copy rc=$?"; cat $OUT/copy.out ;;
  esac
done
