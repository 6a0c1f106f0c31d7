#!/usr/bin/env bash
# On the GPU machine: the old wheel (2c44d7c) and the new package (.carry/new) A/B on
# python -m spillway.tpch, and the pytest suite of the new one.
# Usage: bash .carry/py.sh [RUNS] [MODE...]   MODE: pytest | ab
set -u
REPO=$PWD
W=$REPO/.carry/wheels
RUNS=${1:-3}; shift || true
MODES=${*:-pytest ab}
python3 -m pip install -q --no-deps --no-index --target /tmp/sp-old $W/old/spillway-*.whl >/dev/null 2>&1
python3 -m pip install -q --no-deps --no-index --target /tmp/tp $W/tpchgen_cli-*.whl >/dev/null 2>&1
mkdir -p /tmp/py && (cd /tmp/py && python3 -m zipfile -e $W/duckdb-*.whl . )
export PATH=/tmp/tp/bin:$PATH
NEW=$REPO/.carry/new
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $OUT/machine.txt
date -u >> $OUT/machine.txt; nproc >> $OUT/machine.txt
for m in $MODES; do
  case $m in
  pytest)
    (cd tests/python && PYTHONPATH=$NEW:/tmp/py timeout 300 python3 -m pytest -q -rs -x -p no:cacheprovider . > $OUT/pytest.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest.log)
    tail -3 $OUT/pytest.log ;;
  cpp)
    mkdir -p /tmp/bin && tar xJf .carry/binlib.tar.xz -C /tmp
    for t in ${CPP_TESTS:-memory_buffer_resource memory_spilling io_device_reader io_device_writer table_pack table_gpu table_gpu_join table_gpu_groupby table_spillable_tables ops_hash_join ops_groupby}; do
      LD_LIBRARY_PATH=/tmp/bin timeout 200 /tmp/bin/test_$t > /tmp/cpp-$t.log 2>&1
      rc=$?; (echo "=== test_$t rc=$rc"; cat /tmp/cpp-$t.log) >> $OUT/cpp.log
      echo "test_$t rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' /tmp/cpp-$t.log | tr '\n' ' ')"
    done ;;
  diag)
    [ -f /tmp/tpch/lineitem/lineitem.2.parquet ] || PYTHONPATH=$NEW:/tmp/py python3 -c "
from pathlib import Path; from spillway.tpch import generate; generate(10, 2, Path('/tmp/tpch'))"
    for lim in none 25%; do
      extra=""; [ $lim != none ] && extra="--device-limit $lim"
      PYTHONPATH=$NEW:/tmp/py timeout 120 python3 .carry/diag.py --data /tmp/tpch --scale 10 --ranks 2 --gpu $extra > $OUT/diag-${lim%\%}.log 2>&1
      echo "diag $lim rc=$?"; grep -E "^thread|ratio" $OUT/diag-${lim%\%}.log
    done ;;
  ab)
    [ -f /tmp/tpch/lineitem/lineitem.2.parquet ] || PYTHONPATH=$NEW:/tmp/py python3 -c "
from pathlib import Path; from spillway.tpch import generate; generate(10, 2, Path('/tmp/tpch'))"
    for r in $(seq 1 $RUNS); do
      for lim in none 25%; do
        for v in ${VERSIONS:-old new}; do
          P=$NEW; [ $v = old ] && P=/tmp/sp-old
          extra=""; [ $lim != none ] && extra="--device-limit $lim"
          log=/tmp/sf10-$v-${lim%\%}-run$r.log
          PYTHONPATH=$P:/tmp/py timeout 120 python3 -m spillway.tpch --data /tmp/tpch --scale 10 --ranks 2 --gpu $extra > $log 2>&1
          rc=$?; (echo "=== $v lim=$lim run$r rc=$rc"; cat $log) >> $OUT/ab.log
          echo "$v lim=$lim run$r rc=$rc: $(grep -o 'ratio.*' $log) | $(grep -o 'of which waiting[^|]*' $log)"
        done
      done
    done ;;
  esac
done
