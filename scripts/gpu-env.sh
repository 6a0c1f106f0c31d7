# Sourced (not run) by the scripts run on the GPU machine, gpu-check.sh and headline-figures.sh, from
# the repo root: sets B to the GPU build's folder (build/gpu, or where SPILLWAY_BUILD's archive
# of scripts/gpu-pack.sh was unpacked), puts its lib/ on LD_LIBRARY_PATH, names a spill folder
# for the benchmarks, and defines gpu_machine, which prints the machine and the build's commit.
B=$(bash scripts/gpu-build-dir.sh "${SPILLWAY_BUILD:-build/gpu}") || exit 2
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPILLWAY_BENCH_SPILL_DIR=${SPILLWAY_BENCH_SPILL_DIR:-/tmp}

# The commit is the one scripts/gpu-build.sh recorded in the build, not the checkout's here:
# the carried checkout and the carried build need not match.
gpu_machine() {
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "cpus: $(nproc)"
  echo "build: $(cat "$B/BUILD_COMMIT" 2>/dev/null || echo "unknown (no $B/BUILD_COMMIT)")"
}
