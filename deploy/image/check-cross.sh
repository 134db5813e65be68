#!/usr/bin/env bash
# `make test-cross`: the image for amd64 and for arm64 on this machine. The one for this
# machine's architecture is the tests' image (make test-image-build: the tests' binary,
# assembled by build.sh); the other is built by the route a laptop of the other kind takes
# (deploy/image/cross-build.sh, cross-compiled, then build.sh with IMAGE_ARCH: make image).
# Each is checked by what a node would meet, not by what the scripts say they did:
#   - the image config says linux/ARCH;
#   - the binary and the image's libc are ELF files for ARCH;
#   - every Debian package in the image is ARCH's (or "all");
#   - the binary runs, under qemu-user with the image's own loader and libraries
#     (qemu-user's -L), and says the commit it was built from;
# and a binary of the other architecture is refused by build.sh (IMAGE_ARCH) before an
# image is written; the machine's own dpkg architectures are as they were.
#
#   deploy/image/check-cross.sh OUT_DIR NATIVE_IMAGE_DIR
#
# The dev profile (no fat LTO: the release build's 5 minutes buy nothing here), its binary
# built by `make cross-bins` beforehand. SUDO (make's) runs build.sh as root; DEB_CACHE is
# passed on to it.
set -euo pipefail

die() { echo "check-cross.sh: FAIL: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: check-cross.sh OUT_DIR NATIVE_IMAGE_DIR"
out=$1 native=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sudo=${SUDO:-}
commit=$(git -C "$repo" rev-parse HEAD)
foreign=$(dpkg --print-foreign-architectures | tr '\n' ' ')
elf() { od -An -tx1 -j18 -N2 "$1" | tr -d ' \n'; }

for arch in amd64 arm64; do
  case $arch in
    amd64) machine=3e00 triplet=x86_64-linux-gnu qemu=qemu-x86_64 ;;
    arm64) machine=b700 triplet=aarch64-linux-gnu qemu=qemu-aarch64 ;;
  esac
  if [ "$arch" = "$(dpkg --print-architecture)" ]; then
    d=$native
    [ -f "$d/image.env" ] || die "$d/image.env: no image for this machine's $arch (make test-image-build)"
  else
    d="$out/$arch"
    LEADERWATCH_COMMIT=$commit "$here/cross-build.sh" "$arch" "$d/leaderwatch" dev
    $sudo env DEB_CACHE="${DEB_CACHE:-}" IMAGE_ARCH="$arch" LEADERWATCH_COMMIT="$commit" \
      "$here/build.sh" "$d/leaderwatch" "$d"
    other=$d
  fi
  # shellcheck disable=SC1091 # written by build.sh just now
  . "$d/image.env"

  got=$(skopeo inspect --config "oci:$IMAGE_LAYOUT:$IMAGE_TAG" |
    python3 -c 'import json, sys; c = json.load(sys.stdin); print(c["os"] + "/" + c["architecture"])')
  [ "$got" = "linux/$arch" ] || die "$arch image: its config says $got"

  rootfs="$d/rootfs"
  bin="$rootfs/usr/local/bin/leaderwatch"
  [ "$(elf "$bin")" = "$machine" ] || die "$arch image: the binary's ELF machine is $(elf "$bin"), not $machine"
  libc=""
  for l in "$rootfs/usr/lib/$triplet/libc.so.6" "$rootfs/lib/$triplet/libc.so.6"; do
    [ -e "$l" ] && libc=$l && break
  done
  [ -n "$libc" ] || die "$arch image: no libc.so.6 under lib/$triplet (under usr/lib: $(find "$rootfs/usr/lib" -mindepth 1 -maxdepth 1 -printf "%f ")))"
  [ "$(elf "$(readlink -f "$libc")")" = "$machine" ] || die "$arch image: its libc is not for $arch"

  for s in "$rootfs"/var/lib/dpkg/status.d/*; do
    a=$(sed -n 's/^Architecture: //p' "$s")
    [ "$a" = "$arch" ] || [ "$a" = all ] || die "$arch image: package $(basename "$s") is for $a"
  done

  said=$("$qemu" -L "$rootfs" "$bin" --version) || die "$arch image: its binary did not run under $qemu -L (the image's libraries)"
  [[ $said == *"$commit"* ]] || die "$arch image: --version said \"$said\", not commit $commit"
  echo "check-cross.sh: $arch: $IMAGE_DIGEST, linux/$arch, ELF $machine, $(find "$rootfs"/var/lib/dpkg/status.d -type f | wc -l) packages, runs: $said"
done

# Negative control: the other architecture's binary where this one is asked for is refused,
# no image written.
here_arch=$(dpkg --print-architecture)
other_arch=$(sed -n 's/^IMAGE_ARCH=//p' "$other/image.env")
wrong="$out/wrong"
rm -rf "$wrong"
if err=$($sudo env DEB_CACHE="${DEB_CACHE:-}" IMAGE_ARCH="$here_arch" "$here/build.sh" "$other/leaderwatch" "$wrong" 2>&1); then
  die "build.sh made an $here_arch image of an $other_arch binary"
fi
[[ $err == *"is $other_arch, not the $here_arch asked for"* ]] || die "build.sh refused the wrong binary, but not for its architecture: $err"
[ ! -e "$wrong/oci" ] || die "build.sh refused the wrong binary but left an image in $wrong/oci"
echo "check-cross.sh: an $other_arch binary for an $here_arch image is refused: ${err##*build.sh: }"

[ "$(dpkg --print-foreign-architectures | tr '\n' ' ')" = "$foreign" ] ||
  die "the machine's dpkg architectures changed: was \"$foreign\""
echo "check-cross.sh: PASS (amd64 and arm64 on $here_arch; dpkg's architectures untouched)"
