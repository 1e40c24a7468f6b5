#!/bin/sh
# ember-sdk side by side with pprof-rs: builds this standalone project (release, frame
# pointers forced by .cargo/config.toml) and runs every measurement, alternated; prints the
# Markdown tables of README.md. ROUNDS=n sets the CPU-overhead rounds (default 9).
# CARGO_TARGET_DIR is honoured (default: bench/sdk/target).
set -eu
cd "$(dirname "$0")"
# The config file sets them too; set here as well so a RUSTFLAGS in the caller's
# environment (which would override the config file) cannot drop frame pointers.
export RUSTFLAGS="${RUSTFLAGS:-} -C force-frame-pointers=yes"
nice -n 10 cargo build --release --locked
target="${CARGO_TARGET_DIR:-target}"
exec "$target/release/ember-sdk-bench"
