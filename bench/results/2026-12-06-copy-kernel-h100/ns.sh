#!/bin/bash
# nsys of the GPU hashed shuffle: ns.sh OUT O...
Z=$(cd "$(dirname "$0")" && pwd)
O=$1; shift; mkdir -p "$O"
for o in "$@"; do
  NSYS_EXTRA_LIBS=$Z/nslib NSYS_BUSY=1 bash "$Z/nsys-timeline.sh" /tmp/ns-$o "$Z/${SBS:-sbs-new}" -C local --ranks 2 -c 10 -n 200000000 -p 1 -o $o -s -m pool -r 1 -w 1 > "$O/ns-$o.txt" 2>&1
  echo "ns $o rc=$?"
done
