#!/usr/bin/env bash
# Builds the container image from deploy/image/Containerfile: bin/image-context gets the
# static binary and the data directory, then buildah (else podman) builds from it.
# Usage: build.sh IMAGE BINARY
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:?image name}
bin=${2:?binary}

if command -v buildah >/dev/null 2>&1; then
	builder=(buildah bud)
elif command -v podman >/dev/null 2>&1; then
	builder=(podman build)
else
	echo "deploy/image/build.sh: neither buildah nor podman is installed (apt-get install buildah)" >&2
	exit 1
fi
# The static binary only: a dynamically linked one would not start on scratch.
if ! file "$bin" 2>/dev/null | grep -q 'statically linked' && command -v file >/dev/null 2>&1; then
	echo "deploy/image/build.sh: $bin is not statically linked (build it with CGO_ENABLED=0: make build)" >&2
	exit 1
fi

ctx=bin/image-context
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/var/lib/shale"
cp "$bin" "$ctx/rootfs/shale"
chmod 0755 "$ctx/rootfs/shale"
cp deploy/image/Containerfile "$ctx/Containerfile"

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"${builder[@]}" --quiet -f "$ctx/Containerfile" -t "$image" \
	--build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg CREATED="$created" \
	"$ctx"
echo "deploy/image/build.sh: built $image"
