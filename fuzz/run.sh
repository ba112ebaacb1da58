#!/usr/bin/env bash
# Coverage-guided fuzzing of a target (default `restore`; `restore_cache` fuzzes the
# cache's restore) for N seconds (default 60) on the stable toolchain:
# the instrumentation flags `cargo fuzz` passes, without its AddressSanitizer (nightly
# only; the crate's unsafe code is not on the restore path). With a nightly toolchain and
# cargo-fuzz installed, `cargo +nightly fuzz run TARGET` runs the same target.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
name=${2:-restore}
target=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "corpus/$name" artifacts
# Seeds (real snapshots), built without instrumentation.
CARGO_TARGET_DIR=target/seeds cargo run --quiet --release --bin seeds -- corpus
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# --target keeps RUSTFLAGS off build scripts, as cargo-fuzz does.
cargo build --release --target "$target" --bin "$name"
"target/$target/release/$name" "corpus/$name" -artifact_prefix=artifacts/ -max_total_time="$seconds" \
    -max_len=8192 -rss_limit_mb=1024 -print_final_stats=1
