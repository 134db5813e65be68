#!/usr/bin/env bash
# Assembles leaderwatch's image root filesystem: the release binary plus the Debian 12
# packages Google's distroless images are made of, as far as the binary needs them:
#   base-files netbase tzdata ca-certificates (distroless "static"),
#   libc6 libgcc-s1 (from distroless "cc"; leaderwatch links libc, libm and libgcc_s),
# less documentation and gconv modules; plus a passwd/group with nonroot (65532),
# /home/nonroot, /tmp (1777), nsswitch.conf, the CA bundle update-ca-certificates would
# write, and one dpkg status file per package in /var/lib/dpkg/status.d (as distroless
# writes them, so image scanners see the versions).
# Both `make image` (deploy/image/build.sh) and deploy/Dockerfile run this script, so the two
# images hold the same files.
#
#   deploy/image/rootfs.sh BINARY OUT_DIR [DEB_CACHE]
#
# Needs dpkg-deb and apt-get (Debian); runs as root (files owned by root, as in an image).
# Packages come from the machine's apt sources (`apt-get download`), cached in DEB_CACHE,
# for the binary's architecture (its ELF header: amd64 or arm64). For an architecture that
# is not the machine's, apt reads that architecture's package lists into DEB_CACHE/apt-ARCH,
# leaving the machine's own dpkg and apt state as they were: this is how an arm64 image is
# assembled on an amd64 machine (and the reverse), with nothing run under emulation.
# SOURCE_DATE_EPOCH (default: 0) sets every file's mtime, so two builds of one binary give
# the same layer.
set -euo pipefail

die() { echo "rootfs.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: rootfs.sh BINARY OUT_DIR [DEB_CACHE]"
bin=$1 out=$2 cache=${3:-$(mktemp -d)}
[ -x "$bin" ] || die "$bin: not an executable (build it first: cargo build --release --locked)"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (a Debian tool)"
[ "$(id -u)" = 0 ] || die "run as root: the image's files must be owned by root"
epoch=${SOURCE_DATE_EPOCH:-0}

# The binary's architecture, from its ELF header's machine field; the packages follow it.
case $(od -An -tx1 -j18 -N2 "$bin" | tr -d ' \n') in
  3e00) arch=amd64 triplet=x86_64-linux-gnu ;;
  b700) arch=arm64 triplet=aarch64-linux-gnu ;;
  *) die "$bin: not an x86-64 or aarch64 ELF executable" ;;
esac

packages=(base-files netbase tzdata ca-certificates libc6 libgcc-s1)
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# apt for the binary's architecture: the machine's own, or a private state for a foreign one.
apt_opts=()
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  state="$cache/apt-$arch"
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  apt_opts=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
    -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" -o Dir::State::Status=/dev/null)
  # The lists are read once per cache; a stale one is refreshed by deleting DEB_CACHE.
  if ! ls "$state/lists/"*_Packages* >/dev/null 2>&1; then
    apt-get "${apt_opts[@]}" update -qq || die "apt-get update for $arch failed"
  fi
fi

# The candidate version of each package and its .deb in the cache; missing ones are
# downloaded. A machine without package lists gets them first (apt-get update).
debs=()
for p in "${packages[@]}"; do
  v=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Version: //p') || true
  if [ -z "$v" ]; then
    apt-get "${apt_opts[@]}" update -qq || die "apt-get update failed"
    v=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$p" | sed -n 's/^Version: //p')
  fi
  [ -n "$v" ] || die "no version of $p ($arch) in the apt sources"
  f="$cache/${p}_${v//:/%3a}_$arch.deb"
  [ -f "$f" ] || f="$cache/${p}_${v//:/%3a}_all.deb"
  if [ ! -f "$f" ]; then
    (cd "$cache" && apt-get "${apt_opts[@]}" -o APT::Sandbox::User=root download -qq "$p=$v") || die "apt-get download $p=$v ($arch) failed"
    # This architecture's or "all": the cache holds other architectures' of the same version.
    for f in "$cache/${p}_${v//:/%3a}_$arch.deb" "$cache/${p}_${v//:/%3a}_all.deb"; do
      [ -f "$f" ] && break
    done
    [ -f "$f" ] || die "apt-get download $p=$v wrote no .deb into $cache"
  fi
  debs+=("$f")
done

rm -rf "$out"
mkdir -p "$out"
status="$out/var/lib/dpkg/status.d"
mkdir -p "$status"
for f in "${debs[@]}"; do
  dpkg-deb -x "$f" "$out"
  p=$(dpkg-deb -f "$f" Package)
  { dpkg-deb -f "$f"; } >"$status/$p"
done

# What the packages' maintainer scripts would have done, and what distroless adds.
cat "$out"/usr/share/ca-certificates/mozilla/*.crt >"$out/etc/ssl/certs/ca-certificates.crt"
cat >"$out/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$out/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
EOF
echo 'hosts: files dns' >"$out/etc/nsswitch.conf"
mkdir -p "$out/tmp" "$out/root" "$out/home/nonroot" "$out/usr/local/bin"
chmod 1777 "$out/tmp"
chmod 700 "$out/root" "$out/home/nonroot"
chown 65532:65532 "$out/home/nonroot"

# Not needed at run time: documentation (the copyright files stay: licences) and glibc's
# gconv modules (8 MB; only iconv() loads them, and a Rust binary never calls it).
rm -rf "$out/usr/lib/$triplet/gconv"
find "$out/usr/share/doc" -type f ! -name copyright -delete
rm -rf "$out/usr/share/man" "$out/usr/share/info" "$out/usr/share/lintian"
find "$out/usr/share/doc" -type d -empty -delete

install -m 0755 "$bin" "$out/usr/local/bin/leaderwatch"
find "$out" -exec touch -h -d "@$epoch" {} +
