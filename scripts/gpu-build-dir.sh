#!/usr/bin/env bash
# Prints the absolute path of a GPU build's folder: the folder given, or, for the archive of
# scripts/gpu-pack.sh (*.tar.xz), where it was unpacked (SPILLWAY_UNPACK_DIR, default
# /tmp/spillway-gpu-build; outside the checkout). For the scripts run on the GPU machine.
#   B=$(bash scripts/gpu-build-dir.sh "${SPILLWAY_BUILD:-build/gpu}") || exit 2
set -uo pipefail
B=${1:?usage: gpu-build-dir.sh BUILD_DIR_OR_ARCHIVE}
if [[ "$B" == *.tar.xz ]]; then
  [ -f "$B" ] || { echo "gpu-build-dir: no archive $B (made by scripts/gpu-pack.sh)" >&2; exit 2; }
  dest=${SPILLWAY_UNPACK_DIR:-/tmp/spillway-gpu-build}
  rm -rf "$dest" && mkdir -p "$dest"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$B" "$dest" ||
    { echo "gpu-build-dir: could not unpack $B" >&2; exit 2; }
  B=$dest/build/gpu
fi
[ -d "$B" ] || { echo "gpu-build-dir: no build folder $B" >&2; exit 2; }
realpath "$B"
