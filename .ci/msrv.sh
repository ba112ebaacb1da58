#!/usr/bin/env bash
# Checks that the library builds on the minimum Rust version that Cargo.toml declares
# (`rust-version`), with and without default features. The optional `foyer` and `pingora`
# features are left out: foyer and pingora-cache need a newer Rust (see Cargo.toml).
# Installs the toolchain if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "no rust-version in Cargo.toml"; exit 1; }
if ! cargo "+$msrv" --version >/dev/null 2>&1; then
    rustup toolchain install "$msrv" --profile minimal \
        || { echo "the MSRV check needs Rust $msrv; rustup could not install it"; exit 1; }
fi
export CARGO_TARGET_DIR=target/msrv
cargo "+$msrv" check --lib --quiet
cargo "+$msrv" check --lib --quiet --no-default-features
echo "the library builds on Rust $msrv"
