#!/usr/bin/env bash
# Runs every Freshet test: unit and integration tests (including the
# PostgreSQL differential harness, the psql smoke test and the storage crash
# harness), the sqllogictest suites, and the driver tests (psycopg 3, in a
# virtualenv this script creates next to the build cache).
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

echo "== driver tests (psycopg 3) =="
venv="${CARGO_TARGET_DIR:-target}/drivers-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "psycopg[binary]>=3.1,<4" "pytest>=7,<10"
FRESHET_BIN="${CARGO_TARGET_DIR:-target}/debug/freshet" "$venv/bin/python" -m pytest -q tests/drivers

echo "all tests passed"
