#!/usr/bin/env bash
# `make test-dockerfile`: deploy/Dockerfile's build stage compiles from exactly the files it
# copies. The COPY lines of the stage `build` are read from the Dockerfile, those files and
# only those are copied into an empty directory laid out as the image's /src, and
# `cargo check` compiles the binary there (build.rs, include_str! and all), with the commit
# given the way the Dockerfile's build argument gives it. No engine is needed (there is none
# here); what this does not run is the apt and cargo steps inside the base image.
#
# Negative control: the same context without deploy/k8s/leaderwatch must fail, so the check
# can tell a missing file (the bug it guards against: the sitting's manifests, which
# src/k8s/job.rs compiles in, were once not copied). The other stages' COPY sources must
# exist in the repository.
set -euo pipefail

die() { echo "check-dockerfile.sh: $*" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
df="$repo/deploy/Dockerfile"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "SRC... DEST" of each COPY without --from, per stage ("build" or "other").
copies=$(awk '
  /^FROM / { stage = ($NF == "build" && $(NF-1) == "AS") ? "build" : "other"; next }
  /^COPY / && !/--from=/ { line = stage; for (i = 2; i <= NF; i++) line = line " " $i; print line }
' "$df")
[ -n "$copies" ] || die "no COPY line in $df"

# Lays out the build stage's context in $1; skips sources matching $2 (the control).
layout() {
  local ctx=$1 skip=${2:-} stage srcs dest s
  mkdir -p "$ctx"
  while read -r stage rest; do
    [ "$stage" = build ] || continue
    read -ra srcs <<<"$rest"
    dest=${srcs[-1]}
    unset 'srcs[-1]'
    for s in "${srcs[@]}"; do
      [ -e "$repo/$s" ] || die "COPY $s: no such file in the repository"
      [ -n "$skip" ] && [ "$s" = "$skip" ] && continue
      if [[ $dest == */ ]]; then
        mkdir -p "$ctx/$dest"
        cp -a "$repo/$s" "$ctx/$dest"
      else
        mkdir -p "$(dirname "$ctx/$dest")"
        cp -a "$repo/$s" "$ctx/$dest"
      fi
    done
  done <<<"$copies"
}

while read -r stage rest; do
  [ "$stage" = other ] || continue
  read -ra srcs <<<"$rest"
  for s in "${srcs[@]:0:${#srcs[@]}-1}"; do
    [ -e "$repo/$s" ] || die "COPY $s (a later stage): no such file in the repository"
  done
done <<<"$copies"

# Every base image pinned by digest (a tag moves; ARG defaults before the first FROM are
# resolved), and both build stages on the builder's platform, compiling for the target's.
froms=$(awk '
  /^ARG [A-Z_]+=/ && !seen { split(substr($0, 5), kv, "="); arg[kv[1]] = substr($0, 5 + length(kv[1]) + 1) }
  /^FROM / { seen = 1; for (i = 2; i <= NF; i++) if ($i !~ /^--/) { img = $i; break }
             for (a in arg) gsub("\\$\\{" a "\\}", arg[a], img); print img, $NF, $2 }
' "$df")
while read -r img stage platform; do
  [ "$img" = scratch ] && continue
  [[ $img =~ @sha256:[0-9a-f]{64}$ ]] || die "FROM $img (stage $stage): not pinned by digest"
  # shellcheck disable=SC2016 # the literal Dockerfile text
  [ "$platform" = '--platform=$BUILDPLATFORM' ] || die "FROM $img (stage $stage): not on the builder's platform (--platform=\$BUILDPLATFORM): it would build under emulation"
done <<<"$froms"
# shellcheck disable=SC2016 # the literal Dockerfile text
grep -q 'cross-build.sh "$TARGETARCH"' "$df" || die "the build stage does not build for TARGETARCH"
echo "check-dockerfile.sh: base images by digest, on the builder's platform: $(awk '$1 != "scratch" {printf "%s ", $1}' <<<"$froms")"

# A target directory of its own: cargo hashes a workspace's package by its place in the
# workspace, not its path, so the copy's build shared the checkout's build-script run and
# library, and left the tests' binary saying "commit unknown" (make test, 2026-12-07).
check() {
  (cd "$1" && LEADERWATCH_COMMIT=$(git -C "$repo" rev-parse HEAD) \
    CARGO_TARGET_DIR="$repo/target/dockerfile-check" cargo check --locked --offline --bin leaderwatch)
}

layout "$work/ctx"
echo "check-dockerfile.sh: the build stage's context: $(cd "$work/ctx" && find . -type f | wc -l) files"
check "$work/ctx" || die "deploy/Dockerfile's build stage does not compile from the files it copies"

control=deploy/k8s/leaderwatch
grep -q "^build .*$control" <<<"$copies" || die "the build stage no longer copies $control: choose another control"
layout "$work/control" "$control"
if check "$work/control" >"$work/control.log" 2>&1; then
  die "control: without $control the build still compiled, so this check cannot see a missing file"
fi
echo "check-dockerfile.sh: PASS (and without $control it fails: $(grep -m1 -o 'error[^:]*: .*' "$work/control.log" | cut -c1-120))"
