#!/usr/bin/env bash
# `make test-cross`: the image for amd64 and for arm64, both built on this machine by the
# route a laptop takes (deploy/image/cross-build.sh, then build.sh: make image with
# IMAGE_ARCH), one of them for the other architecture than this machine's. Each is checked
# by what a node would meet, not by what the scripts say they did:
#   - the image config says linux/ARCH;
#   - the binary and the image's libc are ELF files for ARCH;
#   - every Debian package in the image is ARCH's (or "all");
#   - the binary runs, under qemu-user with the image's own loader and libraries
#     (qemu-user's -L), and says the commit it was built from;
# and a binary of the other architecture is refused by build.sh (IMAGE_ARCH) before an
# image is written; the machine's own dpkg architectures are as they were.
#
#   deploy/image/check-cross.sh OUT_DIR
#
# The dev profile (no fat LTO: the release build's 5 minutes per architecture buy nothing
# here). SUDO (make's) runs build.sh as root; DEB_CACHE is passed on to it.
set -euo pipefail

die() { echo "check-cross.sh: FAIL: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: check-cross.sh OUT_DIR"
out=$1
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
  d="$out/$arch"
  LEADERWATCH_COMMIT=$commit "$here/cross-build.sh" "$arch" "$d/leaderwatch" dev
  $sudo env DEB_CACHE="${DEB_CACHE:-}" IMAGE_ARCH="$arch" LEADERWATCH_COMMIT="$commit" \
    "$here/build.sh" "$d/leaderwatch" "$d"
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

# Negative control: the arm64 binary where amd64 is asked for is refused, no image written.
wrong="$out/wrong"
rm -rf "$wrong"
if err=$($sudo env DEB_CACHE="${DEB_CACHE:-}" IMAGE_ARCH=amd64 "$here/build.sh" "$out/arm64/leaderwatch" "$wrong" 2>&1); then
  die "build.sh made an amd64 image of an arm64 binary"
fi
[[ $err == *"is arm64, not the amd64 asked for"* ]] || die "build.sh refused the wrong binary, but not for its architecture: $err"
[ ! -e "$wrong/oci" ] || die "build.sh refused the wrong binary but left an image in $wrong/oci"
echo "check-cross.sh: an arm64 binary for an amd64 image is refused: ${err##*build.sh: }"

[ "$(dpkg --print-foreign-architectures | tr '\n' ' ')" = "$foreign" ] ||
  die "the machine's dpkg architectures changed: was \"$foreign\""
echo "check-cross.sh: PASS (amd64 and arm64 from $(dpkg --print-architecture); dpkg's architectures untouched)"
