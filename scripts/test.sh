#!/usr/bin/env bash
# The README's test command: set up a fresh machine, build, run the whole test suite, then build and run the
# downstream example against a tagged clone (StallWatch as a versioned dependency).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh

echo "== build"
swift build --build-tests 2>&1 | tee .build-test.log | grep -E "warning:|error:|Compiling|Build complete" | grep -v Compiling || true
if grep -qE "^/.*(warning|error):" .build-test.log; then
    echo "test.sh: the build has warnings or errors (see above)" >&2
    exit 1
fi
rm -f .build-test.log

echo "== format"
swift format lint --strict --recursive --configuration .swift-format Sources Tests Package.swift \
    Examples/EmbeddedService/Package.swift Examples/EmbeddedService/Sources

echo "== README"
scripts/check-readme.sh

echo "== tests"
# Reports produced by the tests must validate against Config/stall-report.schema.json.
export STALLWATCH_REQUIRE_JSONSCHEMA=1
swift test --skip-build
# Tests that load the whole test process (a thousand threads to create and snapshot) run in test processes of
# their own, after the suite, so they neither disturb nor are disturbed by the suites running in parallel. The
# pool's per-shape test runs in the suite too (where a job the busy pool watchdog never looked at is reported late,
# without samples) and again alone, where nothing keeps the watchdog busy: there every report must be sampled,
# with the blocking function, the async frames and the cause.
STALLWATCH_STRESS=1 swift test --skip-build --filter 'ThousandThreadSnapshotTests'
STALLWATCH_STRESS=1 swift test --skip-build --filter 'blockedWorkerIsOneReportNamingTheTaskWithTheJobsDuration'

echo "== downstream example"
scripts/check-example.sh
