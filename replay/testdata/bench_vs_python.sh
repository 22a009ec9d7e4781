#!/bin/sh
# Side by side, alternating, in one run: `npumon stats FILE` and `npumon
# replay --headless 1ms FILE` (ready: decoded, indexed, first frame drawn)
# (wall, user, sys, peak RSS) against CPython's C-accelerated pickle.load of
# the same file. A second binary (the tree before a change) joins each round.
#   sh replay/testdata/bench_vs_python.sh bin/npumon testdata/bench/snapshot_1m_distinct.pickle [runs] [old-binary]
set -e
BIN=$1; FILE=$2; RUNS=${3:-5}; OLD=$4
PY='import pickle,sys
with open(sys.argv[1],"rb") as f: pickle.load(f)'
echo "file: $FILE ($(stat -c %s "$FILE") bytes)"
for i in $(seq "$RUNS"); do
  echo "round $i, load $(cut -d' ' -f1 /proc/loadavg)"
  /usr/bin/time -f "python3 pickle.load  wall %e s  user %U s  sys %S s  maxrss %M KB" python3 -c "$PY" "$FILE"
  for b in "$BIN" $OLD; do
    /usr/bin/time -f "npumon stats         wall %e s  user %U s  sys %S s  maxrss %M KB  ($b)" "$b" stats "$FILE" >/dev/null
    /usr/bin/time -f "npumon replay ready  wall %e s  user %U s  sys %S s  maxrss %M KB  ($b)" "$b" replay --headless 1ms "$FILE" >/dev/null
  done
done 2>&1
