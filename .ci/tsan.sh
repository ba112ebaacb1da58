#!/usr/bin/env bash
# ThreadSanitizer on the multi-thread stress tests (filter, growth, gate and cache under
# concurrent writers and readers). Needs the nightly toolchain with rust-src (the standard
# library is rebuilt with the sanitizer); installs them if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup toolchain install nightly --profile minimal --component rust-src \
        || { echo "ThreadSanitizer needs the nightly toolchain with rust-src; rustup could not install them"; exit 1; }
fi
target=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1" \
    CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -Zbuild-std --target "$target" --release --test stress --test cache_safety --test cache_model
