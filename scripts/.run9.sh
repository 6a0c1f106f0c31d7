set -u
tar xJf .carry/pack.tar.xz -C .carry && rm .carry/pack.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for t in .carry/t/*; do [ "$(basename $t)" = test_comm_mpi ] && continue; timeout 200 $t --gtest_brief=1 > /tmp/$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$(basename $t).log | tr '\n' ' ')"; done
for np in 2 3; do timeout 150 mpirun --oversubscribe --bind-to none -np $np .carry/t/test_comm_mpi --gtest_brief=1 > /tmp/mpi$np.log 2>&1; echo "test_comm_mpi np$np rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/mpi$np.log | sort | uniq -c | tr '\n' ' ')"; done
grep -h -A8 "Failure" /tmp/*.log | head -30
