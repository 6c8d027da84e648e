#!/usr/bin/env bash
# Builds Examples/EmbeddedService against StallWatch as a versioned dependency and runs it: clones the committed
# HEAD into a temporary directory, tags the clone with a release above every existing tag, points the example's
# `.package(url: "file://…", from: …)` at it, builds, and checks that the service reports the stall it provokes.
# Works offline (SwiftPM resolves a file:// URL with git alone).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=$(mktemp -d /tmp/stallwatch-example.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== clone $(git rev-parse --short HEAD) and tag it"
git clone --quiet --no-hardlinks "$root" "$work/StallWatch"
git -C "$work/StallWatch" checkout --quiet --detach "$(git rev-parse HEAD)"
# A release above every tag already in the repository (vX.Y.Z or X.Y.Z), at least 1.0.0.
highest=$(git -C "$work/StallWatch" tag --list | sed -n 's/^v\{0,1\}\([0-9]\{1,\}\)\.[0-9]\{1,\}\.[0-9]\{1,\}$/\1/p' \
    | sort -n | tail -1)
version="$(( ${highest:-0} + 1 )).0.0"
git -C "$work/StallWatch" -c user.name=check-example -c user.email=check-example@localhost \
    tag -a "$version" -m "StallWatch $version (check-example)"
echo "tagged $version"

echo "== build the example against StallWatch from: $version"
cp -R "$root/Examples/EmbeddedService" "$work/EmbeddedService"
rm -rf "$work/EmbeddedService/.build" "$work/EmbeddedService/Package.resolved"
export STALLWATCH_PACKAGE_URL="file://$work/StallWatch"
export STALLWATCH_VERSION="$version"
swift build --package-path "$work/EmbeddedService" 2>&1 | tee "$work/build.log" | grep -E "warning:|error:|Build complete" || true
if ! grep -q "Build complete" "$work/build.log"; then
    echo "check-example.sh: the example did not build (see above)" >&2
    exit 1
fi
if grep -q "EmbeddedService/Sources/.*warning:" "$work/build.log"; then
    echo "check-example.sh: the example's own code has warnings" >&2
    exit 1
fi
resolved=$(sed -n 's/.*"version" *: *"\([^"]*\)".*/\1/p' "$work/EmbeddedService/Package.resolved")
if [ "$resolved" != "$version" ]; then
    echo "check-example.sh: resolved StallWatch '$resolved', expected the tag $version" >&2
    exit 1
fi

echo "== run it"
mkdir -m 0700 "$work/reports"
bin=$(swift build --package-path "$work/EmbeddedService" --show-bin-path)/EmbeddedService
STALLWATCH_REPORT_DIRECTORY="$work/reports" STALLWATCH_HEARTBEAT=false timeout 60 "$bin"
count=$(find "$work/reports" -name '*.json' | wc -l)
if [ "$count" -ne 1 ]; then
    echo "check-example.sh: expected one report on disk, found $count" >&2
    exit 1
fi
echo "check-example.sh: the example built against StallWatch $version and reported its stall"
