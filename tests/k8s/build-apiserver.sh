#!/usr/bin/env bash
# Builds kube-apiserver (and etcd when Debian's etcd-server is not installed) from the Go
# module proxy into a cache outside the repository, so the chart test can have a real API
# server accept the rendered manifests. Kubernetes does not publish k8s.io/kubernetes as an
# importable module: its go.mod replaces every k8s.io/* staging module with ./staging/...,
# which a consumer cannot see, so this writes a throwaway module that requires
# k8s.io/kubernetes and replaces each staging module with its published v0.x twin.
# Safe to run again: it does nothing when the binaries are already there.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
cache=${SHALE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shale}
apiserver=$cache/kube-apiserver-$K8S_VERSION
etcd_bin=$cache/etcd-for-$K8S_VERSION
mkdir -p "$cache"

staging_version=v0.${K8S_VERSION#v1.}

if [ ! -x "$apiserver" ] || [ ! -x "$etcd_bin" ]; then
	work=$(mktemp -d "$cache/build-apiserver.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	{
		echo "module shale.local/kube-apiserver-build"
		echo
		sed -n 's/^go \(.*\)/go \1/p' "$modfile"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
	} >"$work/go.mod"
	# etcd's server module at the version Kubernetes itself requires, built from the same
	# module graph (its own go.mod has replace directives, so `go install pkg@v` refuses it).
	printf 'package main\n\nimport (\n\t_ "go.etcd.io/etcd/server/v3/etcdmain"\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n)\n\nfunc main() {}\n' >"$work/main.go"
	echo "build-apiserver.sh: building kube-apiserver $K8S_VERSION and etcd (about 10 minutes on 2 cores)"
	(cd "$work" && GOFLAGS=-mod=mod go mod tidy)
	(cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$etcd_bin.tmp" go.etcd.io/etcd/server/v3)
	mv "$etcd_bin.tmp" "$etcd_bin"
	(cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$apiserver.tmp" "$apiserver"
fi
echo "build-apiserver.sh: kube-apiserver at $apiserver"
