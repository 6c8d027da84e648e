#!/usr/bin/env bash
# Writes Tests/PublicAPI/<Module>.txt again from the modules a debug build makes: the public API the
# PublicAPITests compare against. Run it after a deliberate change to a public declaration, and commit the lists
# with the change (their diff is the API change a reviewer sees).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
STALLWATCH_UPDATE_PUBLIC_API=1 swift test --skip-build --filter PublicAPITests
git --no-pager diff --stat -- Tests/PublicAPI || true
