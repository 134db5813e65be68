#!/usr/bin/env bash
# Builds the leaderwatch binary for a CPU architecture on this machine's own, with nothing
# run under emulation: for an architecture that is not this machine's, rustup's target
# (rust-std for it) and Debian's cross gcc (the linker, and the C compiler ring's assembly
# needs) are added if missing. `make image` (IMAGE_ARCH) and deploy/Dockerfile's build stage
# (TARGETARCH, on the builder's platform) both run this, so a laptop of either architecture
# builds GKE's amd64 image the same way.
#
#   deploy/image/cross-build.sh ARCH OUT [PROFILE]
#
# ARCH: amd64 or arm64 (Debian's and Kubernetes' names). OUT: where the binary is copied.
# PROFILE: cargo's, release (default; what ships) or dev (the tests: no fat LTO; stripped).
# LEADERWATCH_COMMIT, when set, is the commit the binary says it is (build.rs).
set -euo pipefail

die() { echo "cross-build.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: cross-build.sh amd64|arm64 OUT [release|dev]"
arch=$1 out=$2 profile=${3:-release}
case $arch in
  amd64) triple=x86_64-unknown-linux-gnu gnu=x86_64-linux-gnu debs="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;;
  arm64) triple=aarch64-unknown-linux-gnu gnu=aarch64-linux-gnu debs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
  *) die "$arch: not an architecture this builds (amd64 or arm64)" ;;
esac
case $profile in
  release) dir=release ;;
  dev) dir=debug ;;
  *) die "$profile: not a profile this builds (release or dev)" ;;
esac
command -v cargo >/dev/null || die "cargo not found (Rust 1.95 or newer: https://rustup.rs)"
repo=$(cd "$(dirname "$0")/../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')

args=(build --locked --profile "$profile" --bin leaderwatch)
if [ "$triple" = "$host" ]; then
  strip="strip"
  bin="${CARGO_TARGET_DIR:-$repo/target}/$dir/leaderwatch"
else
  if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
    command -v rustup >/dev/null || die "rustup not found: the $triple standard library comes from \`rustup target add $triple\`"
    rustup target add "$triple" || die "rustup target add $triple failed"
  fi
  if ! command -v "$gnu-gcc" >/dev/null; then
    command -v apt-get >/dev/null || die "$gnu-gcc not found: a C cross compiler for $arch is needed (Debian: $debs)"
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    echo "cross-build.sh: installing $debs"
    # shellcheck disable=SC2086 # two package names
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $debs; } ||
      die "apt-get install $debs failed"
  fi
  strip=$gnu-strip
  env=$(tr 'a-z-' 'A-Z_' <<<"$triple")
  export "CARGO_TARGET_${env}_LINKER=$gnu-gcc" "CC_${triple//-/_}=$gnu-gcc" "AR_${triple//-/_}=$gnu-ar"
  args+=(--target "$triple")
  bin="${CARGO_TARGET_DIR:-$repo/target}/$triple/$dir/leaderwatch"
fi

(cd "$repo" && cargo "${args[@]}") || die "cargo ${args[*]} failed: cargo's error is above"
mkdir -p "$(dirname "$out")"
if [ "$profile" = release ]; then
  cp "$bin" "$out.new"
else
  # The release profile strips the binary itself; the dev one's debug info is most of 270 MB.
  "$strip" -o "$out.new" "$bin" || die "$strip $bin failed"
fi
mv -f "$out.new" "$out"
echo "cross-build.sh: $out ($arch, $profile)"
