#!/bin/bash
S=.carry/s; O=$1; mkdir -p $O; export LD_LIBRARY_PATH=$PWD/$S/lib
date -u > $O/date.txt
for round in 1 2; do for b in old new; do
  $S/btg-$b --benchmark_filter='BM_DeviceCopy|BM_Checksum' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > $O/btg-$b-$round.txt 2>&1
  grep median $O/btg-$b-$round.txt | sed "s/^/$b $round /" | cut -c1-200
done; done
SM="--ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 3 -w 1"
for round in 1 2; do for b in 9706 old; do
  $S/bench-$b -C local $SM > $O/small9-$b-$round.txt 2>&1
  echo "small $b round $round: $(grep '^medians' $O/small9-$b-$round.txt) $(grep shuffle-chunks $O/small9-$b-$round.txt)"
done; done
tar czf $O.tgz -C $(dirname $O) $(basename $O) && rm -rf $O
