#!/usr/bin/env bash
# Runs every Freshet test: unit and integration tests (including the
# PostgreSQL differential harness, the PostgreSQL CDC and Kafka source
# tests against a PostgreSQL and a tansu broker they start, the psql
# smoke test, the storage crash harness and the protocol fuzzer against a
# running server), the
# sqllogictest suites, the driver tests (psycopg 3, psycopg2, asyncpg,
# SQLAlchemy and pandas, in a virtualenv this script creates next to the
# build cache; node-postgres, installed by npm next to it too), and
# the cargo-fuzz targets for a bounded time, and the SQLite sqllogictest
# corpus (../shared/suites/sqlite) against Freshet and PostgreSQL.
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
# pgJDBC and a JDK for the JDBC driver test, from Debian's packages.
if [ ! -f /usr/share/java/postgresql.jar ] || ! command -v java >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q libpostgresql-jdbc-java default-jdk-headless >/dev/null ||
      { apt-get update -q >/dev/null && apt-get install -y -q libpostgresql-jdbc-java default-jdk-headless >/dev/null; }
  else
    echo "missing pgJDBC or java (apt-get install libpostgresql-jdbc-java default-jdk-headless)" >&2
    exit 1
  fi
fi
# A Kafka-compatible broker for the Kafka source tests: tansu, built from
# crates.io once and kept next to the build cache (outside the clone).
tools="${FRESHET_TOOLS_DIR:-${HOME:-/tmp}/.cache/freshet-tools}"
if [ -z "${FRESHET_TANSU_BIN:-}" ]; then
  export FRESHET_TANSU_BIN="$tools/tansu/bin/tansu"
fi
if [ ! -x "$FRESHET_TANSU_BIN" ]; then
  echo "== installing tansu 0.6.0 (Kafka-compatible broker) into $tools/tansu =="
  # An unoptimized build: it compiles in a fraction of the release time
  # and serves the tests' few thousand records easily.
  cargo install tansu --version 0.6.0 --features dynostore --debug --root "$tools/tansu" \
    --target-dir "$tools/tansu-build"
  rm -rf "$tools/tansu-build"
  export FRESHET_TANSU_BIN="$tools/tansu/bin/tansu"
fi
for bin in node npm; do
  command -v "$bin" >/dev/null || { echo "missing $bin (Node.js runs the node-postgres tests)" >&2; exit 1; }
done

echo "== cargo fmt --check =="
# Also checks vendor/pgwire (a path dependency): its patch keeps upstream's
# formatting.
cargo fmt --all -- --check

echo "== cargo clippy (workspace, all targets, warnings denied) =="
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test (workspace) =="
# CI keeps the head and the tail of a long output; the servers' logs and
# backtraces can push a failing test's message out of both. On a failure
# the panic messages are printed again, last.
test_log="$(mktemp)"
if ! cargo test --workspace 2>&1 | tee "$test_log"; then
  echo "== failing tests' messages =="
  grep -A3 "panicked at" "$test_log" | grep -v "^stack backtrace" | tail -60
  rm -f "$test_log"
  exit 1
fi
rm -f "$test_log"

echo "== sqllogictest suites =="
# `cargo test --workspace` built target/debug/freshet (the integration
# tests run it); building it again with `-p freshet-server` would unify
# features differently and compile DataFusion a second time.
cargo run -p freshet-sqllogictest -- \
  --server-binary "${CARGO_TARGET_DIR:-target}/debug/freshet" \
  sqllogictest/tests/

echo "== SQLite sqllogictest corpus against Freshet and PostgreSQL 15 (docs/conformance.md) =="
# Fails on any record Freshet fails that PostgreSQL passes, and on any
# select1-5 file the sqllogictest-rs CLI fails in either protocol.
FRESHET_BIN="${CARGO_TARGET_DIR:-target}/debug/freshet" \
  FRESHET_SLT_BIN="${CARGO_TARGET_DIR:-target}/debug/freshet-sqllogictest" \
  ./scripts/conformance.sh

echo "== driver tests (psycopg 3, psycopg2, asyncpg, SQLAlchemy 2, pandas, pgJDBC, pgbench, dbt) =="
venv="${CARGO_TARGET_DIR:-target}/drivers-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "psycopg[binary]>=3.1,<4" \
  "psycopg2-binary>=2.9,<3" "asyncpg>=0.29,<0.33" "SQLAlchemy>=2.0,<2.1" "pandas>=2,<3" "pytest>=7,<10"
# dbt in a venv of its own (its pins are not the drivers'); dbt-core is
# pinned too, as newer releases fetch a parser from outside PyPI.
dbt_venv="${CARGO_TARGET_DIR:-target}/dbt-venv"
if [ ! -x "$dbt_venv/bin/python" ]; then
  python3 -m venv "$dbt_venv"
fi
"$dbt_venv/bin/pip" install --quiet --disable-pip-version-check "dbt-core==1.9.4" "dbt-postgres==1.9.0"
FRESHET_BIN="${CARGO_TARGET_DIR:-target}/debug/freshet" "$venv/bin/python" -m pytest -q tests/drivers

echo "== driver tests (node-postgres) =="
# npm installs into a folder next to the build cache, not the clone.
node_dir="$(mkdir -p "${CARGO_TARGET_DIR:-target}/node-drivers" && cd "${CARGO_TARGET_DIR:-target}/node-drivers" && pwd)"
[ -f "$node_dir/package.json" ] || (cd "$node_dir" && npm init -y >/dev/null)
(cd "$node_dir" && npm install --silent --no-audit --no-fund "pg@8" "pg-copy-streams@6")
FRESHET_BIN="${CARGO_TARGET_DIR:-target}/debug/freshet" NODE_PATH="$node_dir/node_modules" \
  node --test tests/drivers/node/pg.test.js

echo "== fuzzing (pgwire decoder, SQL planning) =="
# Bounded in time: ${FRESHET_FUZZ_SECONDS:-30} s per target; the build is
# skipped (not failed) past its budget on a machine without a build cache.
FRESHET_FUZZ_BUILD_BUDGET="${FRESHET_FUZZ_BUILD_BUDGET:-2400}" \
  ./scripts/fuzz.sh "${FRESHET_FUZZ_SECONDS:-30}"

echo "all tests passed"
