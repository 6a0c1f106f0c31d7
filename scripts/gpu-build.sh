#!/usr/bin/env bash
# Builds the GPU preset here (nvcc, static CUDA runtime) so that build/gpu can be carried to
# the GPU machine, which has no GoogleTest/Benchmark packages: shared libraries it lacks are
# copied into build/gpu/lib (scripts/gpu-check.sh puts that folder on LD_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset gpu >/dev/null
cmake --build --preset gpu -j "$(nproc)"
mkdir -p build/gpu/lib
for bin in build/gpu/bench/bench_* build/gpu/tests/test_* build/gpu/examples/* build/gpu/tools/*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  ldd "$bin" 2>/dev/null | awk '/libbenchmark|libgtest|libxxhash/ {print $3}'
done | sort -u | xargs -r -I{} cp -L {} build/gpu/lib/
# The commit built, for the scripts on the GPU machine to print (scripts/gpu-env.sh).
commit=$(git log -1 --format="%h %s" | cut -c1-100)
git diff --quiet HEAD -- || commit+=" (with uncommitted changes)"
echo "$commit" > build/gpu/BUILD_COMMIT
echo "gpu-build: $(du -sh build/gpu | cut -f1) in build/gpu; carried libs: $(ls build/gpu/lib | tr '\n' ' ')"
