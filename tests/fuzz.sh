#!/usr/bin/env bash
# Builds every fuzz target of crates/fuzz and runs each for a bounded time
# on the committed seed corpus; fails on any crash. Needs the nightly
# toolchain (rustup toolchain install nightly) and a C++ compiler (for
# libFuzzer); not cargo-fuzz: the targets are built by plain cargo with the
# flags cargo-fuzz would pass (sanitizer coverage, no address sanitizer).
# FUZZ_SECONDS (default 20) per target; FUZZ_TARGETS to run a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-20}
# tests/all.sh compiles the workspace through stable's clippy-driver; the
# nightly build here takes plain rustc.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
targets=${FUZZ_TARGETS:-"npy raw tiff png jpeg cbf fits hdf5 zarr argv"}
target_dir=${CARGO_TARGET_DIR:-$PWD/target}/fuzz
if ! rustc +nightly -V >/dev/null 2>&1; then
  echo "missing: the nightly Rust toolchain (rustup toolchain install nightly); libFuzzer's coverage flags need it" >&2
  exit 1
fi
# An explicit --target keeps the flags off build scripts and proc macros.
# -Awarnings: built as the argv target, the CLI's entry points are unused
# (clippy lints that code in its own stage).
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Awarnings"
cargo +nightly build --release --quiet --manifest-path crates/fuzz/Cargo.toml \
  --target "$host" --target-dir "$target_dir" $(for t in $targets; do printf -- '--bin %s ' "$t"; done)
failed=()
for t in $targets; do
  corpus=crates/fuzz/corpus/$t
  work=$(mktemp -d)
  # New inputs go to a scratch corpus; the committed seeds stay as they are.
  if "$target_dir/$host/release/$t" "$work" "$corpus" -max_total_time="$seconds" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$work/" \
      >"$work/log" 2>&1; then
    echo "fuzz $t: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | grep -o '[0-9]*$') runs)"
    rm -rf "$work"
  else
    echo "fuzz $t: FAILED; the crashing input and log are in $work" >&2
    tail -40 "$work/log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
