#!/usr/bin/env bash
# Installs what StallWatch and its test suite need on a fresh Debian 12 machine: Debian packages (after an
# apt-get update), and from PyPI only the test tooling Debian does not package for the tests' python3. Idempotent:
# does nothing when all is present. The tests never install anything: a missing tool is a failure naming it.
set -euo pipefail

# C libraries the package links (libunwind, libdw, liblzma), found through pkg-config (pkgconf; libdw.pc also
# requires libelf.pc, zlib.pc and liblzma.pc), and the tools tests and benchmarks use.
# prometheus: its promtool checks the metrics text the tests produce, and the server scrapes the endpoint.
# zlib1g-dev: pprof exports are gzipped through zlib. golang-go: `go tool pprof` reads the exports in tests.
packages=(pkgconf libunwind-dev libdw-dev libelf-dev zlib1g-dev liblzma-dev elfutils procps prometheus golang-go)
# python3, nodejs, gcc/binutils: the third-party programs of the sidecar's diagnosis corpus (tests build a stripped
# C service with cc).
packages+=(python3 nodejs gcc libc6-dev binutils)
# strace: the other tracer in the test of `stallwatch dump` on a process that is already traced; util-linux:
# runuser, to dump as another user (elfutils' eu-stack is the dump's reference).
packages+=(strace util-linux)
# systemd: systemd-analyze verifies the shipped units; chromium: renders `reports html` pages headless.
packages+=(systemd chromium)
if [ "${STALLWATCH_BENCH:-0}" = 1 ]; then packages+=(gdb); fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    sudo_=""
    [ "$(id -u)" -eq 0 ] || sudo_="sudo"
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Test tooling only: JSON Schema validation of the reports the tests produce.
if ! python3 -c 'import jsonschema' 2>/dev/null; then
    echo "bootstrap: installing jsonschema (PyPI)"
    python3 -m pip install -q jsonschema
fi
# Test tooling only: the reference parser of the Prometheus text format, for the metrics tests.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    echo "bootstrap: installing prometheus-client (PyPI)"
    python3 -m pip install -q prometheus-client
fi
# Test tooling only: the official OTLP definitions, which parse what the OTLP log exporter posts.
if ! python3 -c 'import opentelemetry.proto.collector.logs.v1.logs_service_pb2' 2>/dev/null; then
    echo "bootstrap: installing opentelemetry-proto (PyPI)"
    python3 -m pip install -q opentelemetry-proto
fi

command -v swift >/dev/null || { echo "bootstrap: swift is not on PATH (expected the Swift 6 toolchain)" >&2; exit 1; }
