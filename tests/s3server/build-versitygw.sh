#!/usr/bin/env bash
# Builds versitygw, the S3 server the tiered-storage tests run as a process of its own
# (tests/s3server), from the Go module proxy into a cache outside the repository, as
# tests/k8s/build-apiserver.sh does for kube-apiserver. tests/deps.sh (and so make test)
# runs it. Safe to run again: it does nothing when the binary is already there.
# VERSITYGW_VERSION must match s3server.Version.
set -euo pipefail

VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
cache=${SHALE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shale}
bin=$cache/versitygw-$VERSITYGW_VERSION
mkdir -p "$cache"

if [ ! -x "$bin" ]; then
	work=$(mktemp -d "$cache/build-versitygw.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	echo "build-versitygw.sh: building versitygw $VERSITYGW_VERSION (a few minutes on 2 cores)"
	# go install pkg@version builds in a module of its own, away from Shale's go.mod;
	# a GOFLAGS such as -mod=mod from the caller would be refused there.
	env -u GOFLAGS GOBIN="$work" CGO_ENABLED=0 \
		go install -trimpath -ldflags='-s -w' "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
	mv "$work/versitygw" "$bin.tmp"
	mv "$bin.tmp" "$bin"
fi
echo "build-versitygw.sh: versitygw at $bin"
