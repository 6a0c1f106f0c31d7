#!/bin/bash
# usage: run1.sh OUT
S=.carry/s; O=$1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv > $O/smi.txt 2>&1
date -u > $O/date.txt
$S/test_table_gpu --gtest_color=no > $O/test_table_gpu.log 2>&1; echo "test_table_gpu rc=$?" | tee -a $O/summary.txt
$S/test_shuffle_shuffler --gtest_color=no > $O/test_shuffle_shuffler.log 2>&1; echo "test_shuffle_shuffler rc=$?" | tee -a $O/summary.txt
tail -1 $O/test_table_gpu.log $O/test_shuffle_shuffler.log
for round in 1 2; do for b in old new; do
  $S/btg-$b --benchmark_filter='BM_DeviceCopy|BM_Checksum' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > $O/btg-$b-$round.txt 2>&1
  grep median $O/btg-$b-$round.txt | sed "s/^/$b $round /"
done; done
SH="--ranks 2 -c 10 -n 200000000 -p 1 -s -m pool -r 3 -w 1"
for round in 1 2; do for b in old new; do for o in $2; do
  $S/bench-$b -C local $SH -o $o > $O/shuffle-$b-o$o-$round.txt 2>&1
  echo "$b round $round -o $o: $(grep '^medians' $O/shuffle-$b-o$o-$round.txt)"
done; done; done
SM="--ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 3 -w 1"
for round in 1 2; do for b in old new; do
  [ -n "$3" ] || break 2
  $S/bench-$b -C local $SM > $O/small-$b-$round.txt 2>&1
  echo "small $b round $round: $(grep '^medians' $O/small-$b-$round.txt) $(grep shuffle-chunks $O/small-$b-$round.txt)"
done; done
# the small-chunks command against 9706bd0 (before c199860)
for round in 1 2; do for b in 9706 old; do
  [ -n "$3" ] || break 2
  $S/bench-$b -C local $SM > $O/small9-$b-$round.txt 2>&1
  echo "small $b round $round: $(grep '^medians' $O/small9-$b-$round.txt) $(grep shuffle-chunks $O/small9-$b-$round.txt)"
done; done
if [ -n "$4" ]; then
  for p in 8 64; do
    ncu --clock-control none --kernel-name regex:'place|count' --launch-skip 4 --launch-count 2 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
      $S/btg-new --benchmark_filter="BM_PartitionAndPack/$p/" --benchmark_min_time=0.05 > $O/ncu-$p.txt 2>&1
    echo "ncu $p rc=$?"
  done
fi
