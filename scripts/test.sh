#!/usr/bin/env bash
# The README's test command: set up a fresh machine, build, run the whole test suite, then build and run the
# downstream example against a tagged clone (StallWatch as a versioned dependency). Fails on a failed build, a
# warning, a failed test, and a selection that ran no test.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-test.XXXXXX")
trap 'rm -rf "$log_dir"' EXIT

scripts/bootstrap.sh

echo "== build"
# The build's own exit status decides; its output is kept to show the warnings and errors.
if ! swift build --build-tests >"$log_dir/build.log" 2>&1; then
    grep -E "(warning|error):" "$log_dir/build.log" || tail -n 40 "$log_dir/build.log"
    echo "test.sh: the build failed (status above)" >&2
    exit 1
fi
if grep -qE "^/.*(warning|error):" "$log_dir/build.log"; then
    grep -E "^/.*(warning|error):" "$log_dir/build.log"
    echo "test.sh: the build has warnings" >&2
    exit 1
fi
echo "build: $((SECONDS - started)) s"

echo "== format"
swift format lint --strict --recursive --configuration .swift-format Sources Tests Package.swift \
    Examples/EmbeddedService/Package.swift Examples/EmbeddedService/Sources

echo "== README"
scripts/check-readme.sh

# run_tests NAME ARGS...: runs `swift test --skip-build ARGS...`, fails when it fails or when it ran no Swift Testing
# test (a selection that matches nothing, a renamed suite) or skipped one it was meant to run.
run_tests() {
    local name=$1
    shift
    local log="$log_dir/$name.log"
    local status=0
    swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "test.sh: $name: swift test exited with status $status" >&2
        exit 1
    fi
    local ran
    ran=$(grep -E '^(✔|✘) Test ' "$log" | grep -cvE '^(✔|✘) Test run with' || true)
    if [ "$ran" -eq 0 ]; then
        echo "test.sh: $name: no test ran (swift test $*)" >&2
        exit 1
    fi
    echo "test.sh: $name: $ran tests passed"
}

echo "== tests"
# How many tests run at once. The runner queues a test before its time limit starts; the suites run each test on
# threads of their own (`OffPoolTrait`), so a test that blocks holds no thread of the Swift Concurrency pool.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-2}
run_tests suite
# The stress tests (the `StressTests` suite of each test module: bounded, but each needs a test process of its own)
# are skipped in the suite and run here, after it, where nothing else loads the process: a selection by the
# enclosing suite, so that a renamed test is still selected, and one that must run every test it selects.
echo "== stress tests"
STALLWATCH_STRESS=1 run_tests stress --filter '\.StressTests/'
if grep -qE '^. Test .* skipped' "$log_dir/stress.log"; then
    echo "test.sh: stress tests were skipped (see above)" >&2
    exit 1
fi

echo "== downstream example"
scripts/check-example.sh

echo "test.sh: passed in $((SECONDS - started)) s"
