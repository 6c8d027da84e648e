#!/usr/bin/env bash
# Checks that README.md tells the truth about the package: its module map lists exactly the targets of
# Package.swift, and its embedding snippet is Examples/EmbeddedService's main.swift (without the file's leading
# comment), which scripts/check-example.sh builds and runs.
set -euo pipefail
cd "$(dirname "$0")/.."

swift package dump-package >.dump-package.json
trap 'rm -f .dump-package.json' EXIT
python3 - <<'PY'
import json, re, sys

readme = open("README.md").read()
problems = []

targets = {t["name"] for t in json.load(open(".dump-package.json"))["targets"]}
# The targets' table, up to the next section or subsection (the rooms of a library come after it).
section = re.split(r"\n##+ ", readme.split("## Module map", 1)[1], maxsplit=1)[0]
listed = set()
for row in section.splitlines():
    if row.startswith("| `"):
        listed |= set(re.findall(r"`([^`]+)`", row.split("|")[1]))
if listed != targets:
    problems.append("README module map vs Package.swift: missing %s, extra %s"
                    % (sorted(targets - listed), sorted(listed - targets)))

lines = open("Examples/EmbeddedService/Sources/EmbeddedService/main.swift").read().splitlines()
while lines and lines[0].startswith("//"):
    lines.pop(0)
embedding = readme.split("## Embedding", 1)[1]
snippet = embedding.split("```swift\n", 1)[1].split("```", 1)[0]
if snippet.splitlines() != lines:
    problems.append("README embedding snippet differs from Examples/EmbeddedService/Sources/EmbeddedService/main.swift")

for p in problems:
    print("check-readme.sh: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "check-readme.sh: module map and embedding snippet match"
