#!/bin/sh
# make crosscheck: compare `npumon stats` with torch 1.13's own viewer,
# `python3 -m torch.cuda._memory_viz stats`, on 1.13-form exports of every
# real fixture and generated snapshot. Installs Debian's python3-torch
# (1.13, CPU only) when missing. Usage: crosscheck.sh /abs/path/to/npumon
set -e
BIN=$1
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
if ! $PY -c 'import torch' 2>/dev/null; then
  apt-get install -y --no-install-recommends python3-torch
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail=0
for f in "$HERE"/../../testdata/fixtures/snapshots/*.pickle "$HERE"/cuda21_p4.pickle "$HERE"/cuda21.json \
         "$HERE"/npu_workspace.pickle "$HERE"/torch113_list.pickle "$HERE"/wide_addr.pickle; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  "$BIN" export "$f" --to pickle --schema 1.13 -o "$OUT/$name.113"
  # Run from $OUT: the module must not shadow stdlib modules from its own dir.
  (cd "$OUT" && $PY -m torch.cuda._memory_viz stats "$name.113") > "$OUT/torch.txt"
  "$BIN" stats --json "$OUT/$name.113" > "$OUT/npumon.json"
  if $PY - "$OUT/torch.txt" "$OUT/npumon.json" "$name" <<'PYEOF'
import ast, json, re, sys
torch_txt, npumon_json, name = sys.argv[1:]
# pprint of {'segments': N, 'total_size': 13.2GiB, '<state>': 1.3GiB, ...}
text = open(torch_txt).read()
got = dict(re.findall(r"'(\w+)': ([^,}]+)", text))
def fmt(num):  # torch 1.13's Bytes.__repr__
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"
st = json.load(open(npumon_json))
devs = st["devices"]
want = {"segments": str(sum(d["segments"] for d in devs)),
        "total_size": fmt(sum(d["reserved_bytes"] for d in devs))}
alloc = sum(d["allocated_bytes"] for d in devs)
pending = sum(d["active_bytes"] - d["allocated_bytes"] for d in devs)
inactive = sum(d["inactive_bytes"] for d in devs)
if alloc: want["active_allocated"] = fmt(alloc)
if pending: want["active_pending_free"] = fmt(pending)
if inactive: want["inactive"] = fmt(inactive)
bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
extra = set(got) - set(want)
if bad or extra:
    print(f"MISMATCH {name}: torch/npumon {bad} extra {sorted(extra)}")
    sys.exit(1)
print(f"ok {name}: {text.strip()}")
PYEOF
  then :; else fail=1; fi
done
exit $fail
