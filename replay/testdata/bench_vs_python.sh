#!/bin/sh
# Side by side, alternating, in one run: `npumon stats FILE` (wall, user, peak
# RSS) against CPython's C-accelerated pickle.load of the same file.
#   sh replay/testdata/bench_vs_python.sh bin/npumon testdata/bench/snapshot_1m_distinct.pickle [runs]
set -e
BIN=$1; FILE=$2; RUNS=${3:-5}
PY='import pickle,sys
with open(sys.argv[1],"rb") as f: pickle.load(f)'
echo "file: $FILE ($(stat -c %s "$FILE") bytes)"
for i in $(seq "$RUNS"); do
  /usr/bin/time -f "python3 pickle.load  wall %e s  user %U s  sys %S s  maxrss %M KB" python3 -c "$PY" "$FILE"
  /usr/bin/time -f "npumon stats         wall %e s  user %U s  sys %S s  maxrss %M KB" "$BIN" stats "$FILE" >/dev/null
done 2>&1
