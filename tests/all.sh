#!/usr/bin/env bash
# Every test of gpuscope, on a fresh Debian machine. Installs what it needs
# (lavapipe for GPU tests without a GPU, Chromium for the browser test, the
# wasm target, npm packages) or stops saying exactly what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || missing+=(mesa-vulkan-drivers)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs npm)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
# libFuzzer in the fuzz stage is C++.
command -v c++ >/dev/null || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing packages: run 'sudo apt-get install -y ${missing[*]}' and try again" >&2
    exit 1
  fi
fi
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
# The fuzz stage builds with nightly (libFuzzer's coverage flags need it).
if ! rustc +nightly -V >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal ||
    echo "missing: the nightly Rust toolchain could not be installed ('rustup toolchain install nightly --profile minimal'); the fuzz stage will fail" >&2
fi

# Clippy's lints ride on the builds: clippy-driver compiles the workspace's
# own crates (their code and the lints, -D warnings) and rustc the
# dependencies, so the workspace is built once instead of checked by clippy
# and then built again (`cargo clippy` does the same with a check build).
# The wasm build of the page (its own stage) is linted the same way.
command -v clippy-driver >/dev/null || rustup component add clippy
export RUSTC_WORKSPACE_WRAPPER=clippy-driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

export NODEVICE_SELECT=1   # silences a Mesa device-select warning
export CARGO_TERM_COLOR=never
# A one-off build gains nothing from incremental state but its disk use.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
df -h . | tail -1 | awk '{print "disk free at start: " $4}'

# Every stage runs even when an earlier one fails, so one failure does not
# hide the others; the summary lists each stage's result and the script
# exits non-zero if any failed. A stage is one command: `if` turns off
# errexit inside it, so multi-step stages are scripts of their own.
results=()
passed=0
failed=0
stage() {
  local name=$1 started=$SECONDS
  shift
  echo "== $name"
  if "$@"; then
    results+=("ok      $name ($((SECONDS - started)) s)")
    passed=$((passed + 1))
  else
    results+=("FAILED  $name ($((SECONDS - started)) s)")
    failed=$((failed + 1))
  fi
}

stage "format" cargo fmt --all --check
# Every cargo command below selects the same packages, the workspace but
# xtask, so that each resolves the dependencies' features as the first
# build did and rebuilds nothing (`-p CRATE` resolves them anew: a second
# build of wgpu). xtask (whose wasm tooling turns on other features of
# serde and friends) is built and tested on its own, before the page;
# maturin's build of the Python crate matches these features too
# (crates/python/Cargo.toml).
ws=(--workspace --exclude xtask)
# `cargo test --no-run` builds what `cargo clippy --all-targets` checks
# (libraries, binaries, tests, examples) except benches, which there are none.
stage "build, with clippy's lints (every target of the workspace)" cargo test "${ws[@]}" --no-run -q
stage "xtask's tests, and the page built for wasm, with clippy's lints" \
  bash -c 'cargo test -q -p xtask && cargo xtask build-web'

# --no-fail-fast: every test binary runs, and all failures are listed.
stage "Rust tests (GPU kernels on lavapipe, goldens, CLI, readers)" cargo test "${ws[@]}" --no-fail-fast

# The memory bounds are measured on a busy machine: a second run shows they
# hold from run to run, not only once.
stage "memory bounds, second run" cargo test "${ws[@]}" --test memory

# wgpu falls back to GL where no Vulkan driver exists: the same kernels must
# give the same answers there (tests/common checks the backend really is GL).
# The same packages keep the features of the build above (no second
# build); the core's test files are named one by one (the CLI's files of the same name,
# slic and spots, run too).
gl_tests=(--lib --test goldens --test stacks)
for f in crates/core/tests/*.rs; do gl_tests+=(--test "$(basename "$f" .rs)"); done
stage "the GPU-vs-CPU suite and the goldens again on llvmpipe through GL" \
  env WGPU_BACKEND=gl cargo test "${ws[@]}" --no-fail-fast "${gl_tests[@]}"

stage "Python package (pip install ., pytest against scipy, scikit-image, astropy)" bash tests/python.sh

stage "fuzz targets (each reader and the CLI's arguments, 10 s each on the seed corpus)" \
  env FUZZ_SECONDS=10 bash tests/fuzz.sh

stage "browser test (headless Chromium, WebGPU on SwiftShader)" cargo xtask test-web

df -h . | tail -1 | awk '{print "disk free at end: " $4}'
echo "== summary"
printf '%s\n' "${results[@]}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
