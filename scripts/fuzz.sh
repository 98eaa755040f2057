#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time (default 60 s
# each; pass another number of seconds as the first argument), starting
# from the corpus committed in fuzz/corpus/. New inputs libFuzzer finds go
# to a scratch corpus, not into the repository; a crash leaves its input in
# fuzz/artifacts/<target>/ and fails the script.
#
# cargo-fuzz is installed into the build cache on first use. The targets
# are built with the toolchain on PATH (no sanitizer, so stable works with
# RUSTC_BOOTSTRAP for the few unstable flags cargo-fuzz passes).
#
# FRESHET_FUZZ_BUILD_BUDGET (seconds, default: none) bounds installing
# cargo-fuzz and building the targets: past it the script says so and
# exits 0 without fuzzing. The test script sets it so that a fresh machine,
# which must compile DataFusion once more for the instrumented build, still
# finishes CI in time; with a warm cache the build takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cache="${CARGO_TARGET_DIR:-$PWD/target}"
tools="$cache/tools"
budget="${FRESHET_FUZZ_BUILD_BUDGET:-}"
bounded() {
  if [ -n "$budget" ]; then
    local status=0
    timeout -k 10 "$budget" "$@" || status=$?
    if [ "$status" = 124 ]; then
      echo "fuzzing skipped: building the fuzz targets took longer than ${budget}s (run ./scripts/fuzz.sh to fuzz)"
      exit 0
    fi
    return "$status"
  fi
  "$@"
}
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
  echo "== installing cargo-fuzz into $tools =="
  bounded cargo install --quiet --locked --root "$tools" cargo-fuzz
fi
export PATH="$tools/bin:$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="$cache/fuzz"
echo "== building the fuzz targets =="
bounded cargo fuzz build --fuzz-dir fuzz --sanitizer none --release
for target in wire_decode sql_plan; do
  scratch="$(mktemp -d)"
  echo "== fuzzing $target for ${seconds}s =="
  # libFuzzer reports every new input; keep its log aside and show the
  # totals, or the end of the log (the crash and its input) on failure.
  log="$scratch.log"
  if ! cargo fuzz run --fuzz-dir fuzz --sanitizer none --release "$target" \
    "$scratch" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzzing: $target failed"
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || tail -n 5 "$log"
  rm -rf "$scratch" "$log"
done
echo "fuzzing: 2 passed, 0 failed"
