#!/usr/bin/env bash
# The repository stands alone: clone the committed HEAD into a fresh temporary
# directory with nothing beside it and run the unit tests there. Every test
# must pass, and none may skip for want of a file (fixtures live in
# testdata/fixtures; a missing one fails its test, so a skip that names a
# file means something looks outside the clone).
#
# Uncommitted changes are not part of the clone: commit first. The unit tests
# run without -race here (make test-unit runs them with it).
#
#   e2e/standalone.sh          (make test-standalone; .ci/run calls it)
set -euo pipefail

src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
head=$(git -C "$src" rev-parse HEAD)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/npumon-standalone.XXXXXX")  # the clone, alone
log=$(mktemp -d "${TMPDIR:-/tmp}/npumon-standalone-log.XXXXXX")
trap 'rm -rf "$tmp" "$log"' EXIT

git clone -q --no-checkout "$src" "$tmp/npumon"
git -C "$tmp/npumon" checkout -q --detach "$head"
ls -A "$tmp" | grep -qvx npumon && { echo "standalone: $tmp holds more than the clone"; exit 1; }

cd "$tmp/npumon"
echo "standalone: unit tests of $(git log --oneline -1) in $tmp/npumon"
status=0
go test -short -count=1 -json ./... >"$log/test.json" 2>"$log/test.err" || status=$?

# Per package its result; every failed test with its output; every skipped
# test with its reason. A skip whose reason names a file, fixture or
# directory is a test that reads something outside the clone.
python3 - "$log/test.json" "$log/test.err" "$status" <<'PY'
import json, re, sys
out, results, pkgs = {}, [], []
for line in open(sys.argv[1]):
    try:
        ev = json.loads(line)
    except ValueError:
        print(line, end="")
        continue
    key = (ev.get("Package"), ev.get("Test"))
    if ev["Action"] == "output":
        out.setdefault(key, []).append(ev["Output"])
    elif ev["Action"] in ("pass", "fail", "skip"):
        (results if ev.get("Test") else pkgs).append((ev["Action"], key))
for action, (pkg, _) in pkgs:
    print("  %-4s %s" % ({"pass": "ok", "fail": "FAIL", "skip": "skip"}[action], pkg))
err = open(sys.argv[2]).read()
if err.strip():
    print(err)
bad = 0
for action, key in results:
    text = "".join(l for l in out.get(key, []) if not l.startswith(("=== ", "--- ")))
    if action == "fail":
        print("FAIL %s %s\n%s" % (key[0], key[1], text))
    elif action == "skip":
        file_skip = re.search(r"fixture|testdata|shared|no such file|not exist|missing|\.(pickle|json|csv|db)\b", text, re.I)
        bad += bool(file_skip)
        print("%s %s %s: %s" % ("SKIP (for a file)" if file_skip else "skip", key[0], key[1], text.strip()))
if sys.argv[3] != "0":
    sys.exit("standalone: unit tests failed in the clone")
if bad:
    sys.exit("standalone: %d test(s) skipped for a missing file" % bad)
print("standalone: all unit tests pass in a fresh clone, none skipped for a missing file")
PY
