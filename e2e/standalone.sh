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
tmp=$(mktemp -d "${TMPDIR:-/tmp}/npumon-standalone.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

git clone -q --no-checkout "$src" "$tmp/npumon"
git -C "$tmp/npumon" checkout -q --detach "$head"
ls -A "$tmp" | grep -qvx npumon && { echo "standalone: $tmp holds more than the clone"; exit 1; }

cd "$tmp/npumon"
echo "standalone: unit tests of $(git log --oneline -1) in $tmp/npumon"
status=0
go test -count=1 -v ./... >"$tmp/test.log" 2>&1 || status=$?

grep -E '^(ok|FAIL|panic:)' "$tmp/test.log" | sed 's/^/  /' || true
if [ "$status" -ne 0 ]; then
  grep -E -A8 -- '--- FAIL|^panic:' "$tmp/test.log" | head -200 || true
  echo "standalone: unit tests failed in the clone (exit $status)"
  exit 1
fi
# The line after a "--- SKIP" is its reason; a reason that names a file,
# fixture or directory is a test that reads something outside the clone.
skips=$(grep -E -A1 -- '--- SKIP' "$tmp/test.log" | grep -Eiv -- '--- SKIP|^--$' || true)
if printf '%s\n' "$skips" | grep -Eiq 'fixture|testdata|shared|no such file|does not exist|not exist|missing|\.pickle|\.json|\.csv|\.db\b'; then
  echo "standalone: tests skipped for a missing file:"
  printf '%s\n' "$skips"
  exit 1
fi
[ -n "$skips" ] && { echo "standalone: skipped (not for a file):"; printf '  %s\n' "$skips"; }
echo "standalone: all unit tests pass in a fresh clone"
