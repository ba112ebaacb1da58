#!/usr/bin/env bash
# Miri (tree borrows, with its data-race detector) on the tests of the crate's unsafe
# table handling: retired tables followed by lookups across doublings, and freed once;
# the hashers a restore replaces, read after the swap and freed once;
# the unchecked bucket and stripe loads on tables filled to their last bucket and window;
# the cache's unchecked shard index, at the extremes of the hash and several shard counts;
# the ghosts' unchecked word index, in tables of several sizes.
# Installs the nightly toolchain's miri component if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src \
        || { echo "Miri needs the nightly toolchain with its miri and rust-src components; rustup could not install them"; exit 1; }
fi
MIRIFLAGS="-Zmiri-tree-borrows" cargo +nightly miri test --lib -- filter::current cache::lock \
    filter::tests::tiny_tables_work filter::tests::tiny_windowed_tables_work filter::tests::ninth_copy_is_refused \
    filter::tests::counts_inserts_and_removes hashing cache::tests::every_hash_picks_one_of_the_shards \
    cache::bloom::tests::every_place_is_a_word_of_the_table
