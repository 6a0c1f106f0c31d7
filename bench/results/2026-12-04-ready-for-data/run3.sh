#!/bin/bash
# usage: run3.sh OUT tests|bench1|bench2
S=.carry/s; O=$1; mkdir -p $O; export LD_LIBRARY_PATH=$PWD/$S/lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
MPIRUN="timeout 200 mpirun --oversubscribe --bind-to none"
date -u > $O/date.txt; nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv >> $O/date.txt 2>&1
if [ "$2" = tests ]; then
  for t in test_memory_transfer_budget test_shuffle_shuffler test_shuffle_shuffler_batches test_shuffle_soak test_ops_hash_join; do
    timeout 240 $S/$t --gtest_color=no > $O/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/$t.log | tr '\n' ' ')"
  done
  for np in 2 3; do
    $MPIRUN -np $np $S/test_shuffle_mpi --gtest_color=no > $O/mpi$np.log 2>&1; echo "test_shuffle_mpi np$np rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/mpi$np.log | head -2 | tr '\n' ' ')"
  done
  f=0; for i in $(seq 1 20); do timeout 60 $S/spillway-bench-join -C local --ranks 2 -b 500000 -p 2000000 -r 1 -w 0 --host-limit 6 --piece 1 --partitions 128 > $O/join.log 2>&1 || { f=$((f+1)); tail -3 $O/join.log; }; done; echo "join out-of-core: $f of 20 failed"
  SM="--ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 3 -w 1"
  for round in 1 2 3; do for b in old new; do
    $S/bench-$b -C local $SM > $O/small-$b-$round.txt 2>&1
    echo "small $b $round: $(grep '^medians' $O/small-$b-$round.txt | cut -c1-150) $(grep -c INVALID $O/small-$b-$round.txt)"
  done; done
fi
if [ "$2" = bench1 ]; then
  SH="--ranks 2 -c 10 -n 200000000 -p 1 -s -m pool -r 3 -w 1"
  for round in 1 2; do for b in old new; do for o in 128 512; do
    timeout 120 $S/bench-$b -C local $SH -o $o > $O/shuffle-$b-o$o-$round.txt 2>&1
    echo "$b $round -o $o: $(grep '^medians' $O/shuffle-$b-o$o-$round.txt | cut -c1-150)"
  done; done; done
  for round in 1 2; do for b in old new; do
    $MPIRUN -np 2 $S/bench-$b -C mpi -c 10 -n 200000000 -p 1 -s -m pool -r 3 -w 1 -o 128 > $O/mpi-$b-$round.txt 2>&1
    echo "mpi $b $round -o 128: $(grep '^medians' $O/mpi-$b-$round.txt | cut -c1-150)"
  done; done
fi
if [ "$2" = bench2 ]; then
  for round in 1 2 3; do for b in old new; do
    timeout 150 $S/bench-$b -C local --ranks 2 -c 10 -n 536870912 -p 10 -o 16 -g -s -m pool -r 5 -w 1 -l 12288 > $O/spill-$b-$round.txt 2>&1
    echo "spill12G $b $round: $(grep '^medians' $O/spill-$b-$round.txt | cut -c1-150) $(grep -E 'spilled|recv-into' $O/spill-$b-$round.txt | head -2 | tr '\n' ' ' | cut -c1-200)"
  done; done
fi
tar czf $O.tgz -C $(dirname $O) $(basename $O) && rm -rf $O
