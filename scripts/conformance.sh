#!/usr/bin/env bash
# Runs the SQLite sqllogictest corpus (select1-5, evidence/, index/)
# against Freshet and against PostgreSQL 15, and prints the per-file table
# of docs/conformance.md: records Freshet passes, records it fails that
# PostgreSQL fails too (a documented difference: SQLite's 0/1 booleans,
# `IN ()`, ...), and unexpected failures. Then runs select1-5 through the
# sqllogictest-rs CLI (`sqllogictest-bin`) in both protocols (`-e
# postgres`, `-e postgres-extended`), where a file passes only if every
# record does.
#
# Usage: scripts/conformance.sh [--cli-only|--no-cli]
# Environment: FRESHET_SQLITE_CORPUS (default ../shared/suites/sqlite next
# to the clone), FRESHET_BIN and FRESHET_SLT_BIN (default: the debug builds
# in $CARGO_TARGET_DIR), FRESHET_PG_USER (the unprivileged user PostgreSQL
# runs as when this runs as root), FRESHET_TOOLS_DIR (where sqllogictest-bin
# is installed once). Exits non-zero when Freshet fails a record PostgreSQL
# passes, or a CLI file fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
corpus="${FRESHET_SQLITE_CORPUS:-$(pwd)/../shared/suites/sqlite}"
target="${CARGO_TARGET_DIR:-target}"
freshet="${FRESHET_BIN:-$target/debug/freshet}"
runner="${FRESHET_SLT_BIN:-$target/debug/freshet-sqllogictest}"
tools="${FRESHET_TOOLS_DIR:-${HOME:-/tmp}/.cache/freshet-tools}"
if [ ! -d "$corpus" ]; then
  echo "no SQLite corpus at $corpus (set FRESHET_SQLITE_CORPUS); skipped"
  exit 0
fi
files=("$corpus"/select{1,2,3,4,5}.test "$corpus"/evidence/*.test "$corpus"/index/*.test)
work="$(mktemp -d)"
chmod 755 "$work"
pg_pid=""
cleanup() {
  if [ -n "$pg_pid" ]; then as_pg pg_ctl -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
as_pg() {
  if [ "$(id -u)" = "0" ]; then runuser -u "${FRESHET_PG_USER:-freshet-pg}" -- "$@"; else "$@"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# select1-5 through the sqllogictest-rs CLI in both protocols, a fresh
# server per file; prints one line per run, returns non-zero on a failure.
cli_runs() {
  local failed=0
  for engine in postgres postgres-extended; do
    for f in "$corpus"/select{1,2,3,4,5}.test; do
      port="$(free_port)"
      http="$(free_port)"
      "$freshet" --data-dir "$work/cli-data" --listen "127.0.0.1:$port" \
        --http-listen "127.0.0.1:$http" >"$work/cli-server.log" 2>&1 &
      server=$!
      for _ in $(seq 1 100); do
        psql -X -q -h 127.0.0.1 -p "$port" -U freshet -c "SELECT 1" >/dev/null 2>&1 && break
        sleep 0.2
      done
      if "$cli" -e "$engine" --label postgresql -h 127.0.0.1 -p "$port" -u freshet -d freshet \
        "$f" >"$work/cli.out" 2>&1; then
        echo "sqllogictest-rs -e $engine $(basename "$f"): passed"
      else
        echo "sqllogictest-rs -e $engine $(basename "$f"): FAILED"
        tail -20 "$work/cli.out"
        failed=1
      fi
      kill "$server" 2>/dev/null || true
      wait "$server" 2>/dev/null || true
      rm -rf "$work/cli-data"
    done
  done
  return "$failed"
}

status=0
cli_pid=""
if [ "$mode" != "--no-cli" ]; then
  cli="$tools/sqllogictest/bin/sqllogictest"
  if [ ! -x "$cli" ]; then
    echo "== installing sqllogictest-bin 0.29.1 into $tools/sqllogictest =="
    cargo install sqllogictest-bin --version 0.29.1 --locked --root "$tools/sqllogictest" \
      --target-dir "$tools/sqllogictest-build"
    rm -rf "$tools/sqllogictest-build"
  fi
  # In the background, beside the corpus runs below.
  cli_runs >"$work/cli-report" 2>&1 &
  cli_pid=$!
fi
if [ "$mode" != "--cli-only" ]; then
  # Freshet: a fresh server per file (the runner's default), in the
  # background while PostgreSQL runs the same files (two cores, two
  # servers).
  "$runner" --verbose --server-binary "$freshet" "${files[@]}" >"$work/freshet.out" 2>&1 &
  freshet_run=$!
  # PostgreSQL 15: a fresh database per file, same runner and labels.
  mkdir -p "$work/pg"
  [ "$(id -u)" = "0" ] && chown "${FRESHET_PG_USER:-freshet-pg}" "$work/pg"
  as_pg initdb -D "$work/pg" -A trust -U postgres >/dev/null
  port="$(free_port)"
  as_pg pg_ctl -D "$work/pg" -o "-p $port -k $work/pg -c fsync=off" -l "$work/pg/log" -w start >/dev/null
  pg_pid=1
  : >"$work/pg.out"
  n=0
  for f in "${files[@]}"; do
    n=$((n + 1))
    psql -X -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE c$n" >/dev/null
    "$runner" --verbose --reference-postgres --host 127.0.0.1 --port "$port" --user postgres \
      --database "c$n" "$f" >>"$work/pg.out" 2>&1 || true
  done
  wait "$freshet_run" || true
  python3 - "$work/freshet.out" "$work/pg.out" "$corpus" <<'EOF' || status=1
import re, sys
fr, pg, corpus = sys.argv[1:4]
def parse(path):
    failed, summary = set(), {}
    for line in open(path, errors="replace"):
        m = re.match(r"--- FAILED (.+):(\d+)$", line.strip())
        if m:
            failed.add((m.group(1), int(m.group(2))))
        m = re.match(r"(.+\.test): (\d+) passed, (\d+) failed, (\d+) skipped", line.strip())
        if m:
            summary[m.group(1)] = tuple(int(x) for x in m.groups()[1:])
    return failed, summary
ffail, fsum = parse(fr)
pfail, _ = parse(pg)
print("| file | records | passed | failed, PostgreSQL too | unexpected | skipped |")
print("|---|---:|---:|---:|---:|---:|")
tot = [0, 0, 0, 0, 0]
sel = [0, 0, 0]
unexpected_records = []
for path, (p, f, s) in fsum.items():
    mine = {r for r in ffail if r[0] == path}
    both = {r for r in mine if r in pfail}
    unexpected = sorted(mine - both)
    unexpected_records += unexpected
    name = path.replace(corpus + "/", "")
    print(f"| {name} | {p + f:,} | {p:,} | {len(both):,} | {len(unexpected):,} | {s:,} |")
    for i, v in enumerate([p + f, p, len(both), len(unexpected), s]):
        tot[i] += v
    if re.match(r"select\d\.test$", name):
        sel[0] += p + f; sel[1] += p; sel[2] += len(unexpected)
print(f"| **total** | **{tot[0]:,}** | **{tot[1]:,}** | **{tot[2]:,}** | **{tot[3]:,}** | **{tot[4]:,}** |")
counted = tot[1] + tot[2]
print()
print(f"select1-5: {sel[1]:,} / {sel[0]:,} passed ({100.0 * sel[1] / max(sel[0], 1):.2f} %)")
print(f"all files: {tot[1]:,} / {tot[0]:,} passed ({100.0 * tot[1] / max(tot[0], 1):.2f} %); "
      f"counting the {tot[2]:,} records PostgreSQL fails too: {100.0 * counted / max(tot[0], 1):.2f} %")
for path, line in unexpected_records[:40]:
    print(f"unexpected: {path}:{line}")
sys.exit(1 if unexpected_records else 0)
EOF
fi

if [ -n "$cli_pid" ]; then
  wait "$cli_pid" || status=1
  cat "$work/cli-report"
fi
exit "$status"
