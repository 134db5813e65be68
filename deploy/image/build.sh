#!/usr/bin/env bash
# Builds leaderwatch's container image without a daemon and without pulling anything:
# deploy/image/rootfs.sh assembles the root filesystem (the release binary and the Debian
# packages distroless is made of), umoci writes it as a one-layer OCI image with the
# entrypoint and user of deploy/Dockerfile. `make image` runs it.
#
#   deploy/image/build.sh BINARY OUT_DIR [TAG]
#
# OUT_DIR/oci is the OCI image layout, tagged TAG, by default unique per build:
# VERSION-COMMIT-UTCTIME (0.1.0-1a2b3c4d5e6f-20261207T181500Z), so a rebuild never reuses a
# tag a node may have pulled; push it and keep the digest the registry returns
# (docs/gke-sitting.md, step 3):
#   . OUT_DIR/image.env; skopeo copy --digestfile /tmp/lw-digest oci:$IMAGE_LAYOUT:$IMAGE_TAG docker://$REPO:$IMAGE_TAG OUT_DIR/rootfs is the unpacked root filesystem,
# OUT_DIR/image.env the figures (digest, sizes) for the tests and the benchmark.
# Needs umoci and skopeo (Debian packages; make image installs them) and root.
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: build.sh BINARY OUT_DIR [TAG]"
bin=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | sed -n 1p)
for t in umoci skopeo; do command -v $t >/dev/null || die "$t not found (Debian package $t; make image installs it)"; done
[ "$(id -u)" = 0 ] || die "run as root: the image's files must be owned by root"

# The image says the architecture its binary is for (the ELF header's machine); rootfs.sh
# takes the Debian packages of the same one: an image labelled amd64 that holds arm64 files
# fails on the node with "exec format error". IMAGE_ARCH, when set, is the architecture the
# caller asked for, and a binary of another is refused here rather than on the node.
case $(od -An -tx1 -j18 -N2 "$bin" | tr -d ' \n') in
  3e00) arch=amd64 ;;
  b700) arch=arm64 ;;
  *) die "$bin: not an x86-64 or aarch64 ELF executable" ;;
esac
[ -z "${IMAGE_ARCH:-}" ] || [ "$IMAGE_ARCH" = "$arch" ] ||
  die "$bin is $arch, not the $IMAGE_ARCH asked for (IMAGE_ARCH): build it with deploy/image/cross-build.sh $IMAGE_ARCH"

# Every timestamp in the image is the last commit's (or 0 outside git): the same binary
# gives the same digest.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
commit=${LEADERWATCH_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}
tag=${3:-$version-${commit:0:12}-$(date -u +%Y%m%dT%H%M%SZ)}

mkdir -p "$out"
out=$(cd "$out" && pwd)
"$here/rootfs.sh" "$bin" "$out/rootfs" "${DEB_CACHE:-$out/debs}"

layout="$out/oci"
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci insert --image "$layout:$tag" --history.created "$created" \
  --history.created_by "deploy/image/rootfs.sh (Debian: base-files netbase tzdata ca-certificates libc6 libgcc-s1; leaderwatch $version)" \
  "$out/rootfs" /
# As deploy/Dockerfile: USER 65532:65532, ENTRYPOINT ["/usr/local/bin/leaderwatch"].
umoci config --image "$layout:$tag" --no-history --created "$created" --os linux --architecture "$arch" \
  --config.user 65532:65532 \
  --config.entrypoint /usr/local/bin/leaderwatch \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.label "org.opencontainers.image.title=leaderwatch" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$commit" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0" \
  --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$layout"

# A second, independent reader of the layout: skopeo parses what a push would send.
inspect=$(skopeo inspect "oci:$layout:$tag") || die "skopeo cannot read the image it would push"
digest=$(sed -n 's/^ *"Digest": "\(.*\)",$/\1/p' <<<"$inspect" | sed -n 1p)
manifest=$(skopeo inspect --raw "oci:$layout:$tag")
compressed=$(python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])' <<<"$manifest")
unpacked=$(du -sb "$out/rootfs" | cut -f1)
binary=$(stat -c %s "$bin")
cat >"$out/image.env" <<EOF
IMAGE_TAG=$tag
IMAGE_ARCH=$arch
IMAGE_DIGEST=$digest
IMAGE_COMPRESSED_BYTES=$compressed
IMAGE_UNPACKED_BYTES=$unpacked
IMAGE_BINARY_BYTES=$binary
IMAGE_LAYOUT=$layout
EOF
printf 'image: oci:%s:%s %s\n  %s bytes compressed (what a pull transfers), %s unpacked, of which the binary %s\n' \
  "$layout" "$tag" "$digest" "$compressed" "$unpacked" "$binary"
