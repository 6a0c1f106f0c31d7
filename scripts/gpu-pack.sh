#!/usr/bin/env bash
# Packs the programs of build/gpu (made by scripts/gpu-build.sh) into one archive small enough
# to carry to the GPU machine: build/gpu is ~340 MB and the device takes 64 MiB, while every
# program of it stripped and xz-compressed is ~20 MB. Packed: the executables of tests/, bench/,
# tools/ and examples/ (the tests' helper programs too: they are found beside the tests),
# lib/, CMakeCache.txt (scripts/demo-run.sh reads whether the build has CUDA) and BUILD_COMMIT.
#   scripts/gpu-pack.sh [ARCHIVE]   (default .carry/gpu-build.tar.xz, which git ignores)
# On the GPU machine, scripts/gpu-check.sh unpacks it when SPILLWAY_BUILD names it:
#   SPILLWAY_BUILD=.carry/gpu-build.tar.xz bash scripts/gpu-check.sh tests
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SPILLWAY_BUILD:-build/gpu}
out=${1:-.carry/gpu-build.tar.xz}
[ -f "$B/CMakeCache.txt" ] && [ -d "$B/lib" ] ||
  { echo "gpu-pack: no build with its lib/ in $B (run scripts/gpu-build.sh)" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/gpu"
cp "$B/CMakeCache.txt" "$stage/build/gpu/"
[ -f "$B/BUILD_COMMIT" ] && cp "$B/BUILD_COMMIT" "$stage/build/gpu/"  # from scripts/gpu-build.sh
cp -r "$B/lib" "$stage/build/gpu/"
for dir in tests bench tools examples; do
  mkdir -p "$stage/build/gpu/$dir"
  for f in "$B/$dir"/*; do
    [ -f "$f" ] && [ -x "$f" ] && [[ "$(basename "$f")" != *.* ]] || continue
    strip -o "$stage/build/gpu/$dir/$(basename "$f")" "$f"
  done
done
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - build | xz -6 -T0 > "$out"
echo "gpu-pack: $(du -h "$out" | cut -f1) in $out ($(find "$stage/build/gpu" -type f | wc -l) files)"
