#!/usr/bin/env bash
# Regenerates the Go code for controller/proto/*.proto (run by `make proto`). Needs protoc
# (Debian: protobuf-compiler); installs the pinned Go plugins into GOBIN when missing.
set -euo pipefail
cd "$(dirname "$0")"

PROTOC_GEN_GO_VERSION=v1.36.12      # matches google.golang.org/protobuf in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # generated code needs grpc >= 1.81; go.mod has v1.85.0

if ! command -v protoc >/dev/null; then
	echo "protoc not found: apt-get install protobuf-compiler" >&2
	exit 1
fi

gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

want_version() { # binary, version: true when the binary reports that version
	command -v "$1" >/dev/null && "$1" --version 2>/dev/null | grep -q -- "${2#v}"
}
want_version protoc-gen-go "$PROTOC_GEN_GO_VERSION" ||
	GOFLAGS= go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
want_version protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" ||
	GOFLAGS= go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	metadata.proto records.proto controller.proto
