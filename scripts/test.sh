#!/usr/bin/env bash
# Runs every Freshet test: unit and integration tests (including the
# PostgreSQL differential harness, the psql smoke test and the storage crash
# harness) and the sqllogictest suites.
#
# It sets up what the tests need itself: PostgreSQL refuses to run as root,
# so when run as root it creates an unprivileged system user for the
# PostgreSQL instances the tests start.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = "0" ]; then
  if ! id -u freshet-pg >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin freshet-pg
  fi
  export FRESHET_PG_USER=freshet-pg
fi
for bin in initdb pg_ctl postgres psql; do
  command -v "$bin" >/dev/null || { echo "missing $bin (PostgreSQL 15 binaries are required)" >&2; exit 1; }
done

echo "== cargo test (workspace) =="
cargo test --workspace

echo "== sqllogictest suites =="
cargo build -p freshet-server --bin freshet
cargo run -p freshet-sqllogictest -- \
  --server-binary "${CARGO_TARGET_DIR:-target}/debug/freshet" \
  sqllogictest/tests/

echo "all tests passed"
