#!/usr/bin/env bash
# make dist: a release to carry to an air-gapped host (docs/release.md). Per
# architecture in $ARCHES a static linux binary and, beside it, what a user
# needs without the repository: README, licence, docs/, the Python producer
# and shell completions, in $DIST/npumon-$VERSION-linux-$ARCH.tar.gz with one
# top directory of the same name; then $DIST/SHA256SUMS over the tarballs.
#
# The files are those git tracks (so no caches, no build output), taken from
# the working tree. The tarballs are reproducible: sorted entries, owner and
# group 0, fixed modes, every mtime the commit's time (SOURCE_DATE_EPOCH
# overrides it), gzip without name or time; the binaries are built with
# -trimpath and without VCS stamping (the ldflags carry the commit).
#
# The Makefile passes GO, VERSION, LDFLAGS, DIST and ARCHES.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DIST=${DIST:-dist}
ARCHES=${ARCHES:-amd64 arm64}
: "${VERSION:?VERSION is not set (run make dist)}"
LDFLAGS=${LDFLAGS:--X main.version=$VERSION}

if ! tar --version 2>/dev/null | grep -q 'GNU tar'; then
  echo "dist: needs GNU tar (--sort, --mtime, --owner)" >&2
  exit 1
fi
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) || {
    echo "dist: no git commit to take the files' time from; set SOURCE_DATE_EPOCH" >&2
    exit 1
  }
fi

# What travels beside the binary: tracked files only.
files=$(git ls-files -- README.md 'LICENSE*' 'NOTICE*' docs monitor/producer/python |
  grep -Ev '(^|/)(__pycache__|\.pytest_cache)/|\.py[co]$' | LC_ALL=C sort)
if ! grep -q '^LICENSE' <<<"$files"; then
  echo "dist: note: the repository has no LICENSE file; the tarballs carry none" >&2
fi

mkdir -p "$DIST"
rm -f "$DIST"/npumon-*-linux-*.tar.gz "$DIST"/SHA256SUMS
stage=$(mktemp -d "${TMPDIR:-/tmp}/npumon-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT

hostarch=$($GO env GOHOSTARCH)
hostbin=""
for arch in $ARCHES; do
  top="npumon-$VERSION-linux-$arch"
  dir="$stage/$top"
  mkdir -p "$dir"
  echo "dist: $top"
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" $GO build -trimpath -buildvcs=false \
    -ldflags "-s -w $LDFLAGS" -o "$dir/npumon" ./cmd/npumon
  if [ "$arch" = "$hostarch" ]; then hostbin="$dir/npumon"; fi
  while IFS= read -r f; do
    mkdir -p "$dir/$(dirname "$f")"
    cp "$f" "$dir/$f"
  done <<<"$files"
done

# Shell completions, made by the host's binary (they are the same for every
# architecture); one is built when no architecture matches the host.
if [ -z "$hostbin" ]; then
  hostbin="$stage/npumon-host"
  CGO_ENABLED=0 $GO build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$hostbin" ./cmd/npumon
fi
comp="$stage/completions"
mkdir -p "$comp"
"$hostbin" completion bash >"$comp/npumon.bash"
"$hostbin" completion zsh >"$comp/_npumon"
"$hostbin" completion fish >"$comp/npumon.fish"

for arch in $ARCHES; do
  top="npumon-$VERSION-linux-$arch"
  cp -r "$comp" "$stage/$top/completions"
  find "$stage/$top" -type d -exec chmod 0755 {} +
  find "$stage/$top" -type f -exec chmod 0644 {} +
  chmod 0755 "$stage/$top/npumon"
  tar --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
    --mtime="@$SOURCE_DATE_EPOCH" -C "$stage" -cf - "$top" | gzip -n -9 >"$DIST/$top.tar.gz"
done

(cd "$DIST" && sha256sum npumon-*-linux-*.tar.gz >SHA256SUMS)
echo "dist: $DIST/SHA256SUMS"
sed 's/^/  /' "$DIST/SHA256SUMS"
