#!/usr/bin/env bash
# Brings what the test suites need when it is missing: Go modules, versitygw (an S3
# server, built into ~/.cache/shale), and the real Kafka
# clients the interop suite drives (Debian's kcat, confluent-kafka-python with its schema
# registry serializers' modules, and kafka-python with its codec modules; npm's kafkajs
# with its codec plugins and @kafkajs/confluent-schema-registry). Safe to run
# again: it installs only what is absent or out of date. Run as root on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download
(cd tests/k8s && go mod download)

# versitygw, the real S3 server of the tiered-storage tests (tests/s3server), built from
# the Go module proxy into ~/.cache/shale once.
bash tests/s3server/build-versitygw.sh

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || need_apt+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || need_apt+=(python3-kafka)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
# kafka-python's optional codecs (it has gzip only without them).
/usr/bin/python3 -c 'import snappy' >/dev/null 2>&1 || need_apt+=(python3-snappy)
/usr/bin/python3 -c 'import lz4.frame' >/dev/null 2>&1 || need_apt+=(python3-lz4)
/usr/bin/python3 -c 'import zstandard' >/dev/null 2>&1 || need_apt+=(python3-zstandard)
# confluent-kafka-python's schema registry client and serializers (tests/interop
# registry_test.go): requests for the client, Apache's avro for the legacy
# confluent_kafka.avro serializer (Debian has no fastavro, which the current AvroSerializer
# needs), jsonschema for JSONSerializer, protobuf for ProtobufSerializer.
/usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || need_apt+=(python3-requests)
/usr/bin/python3 -c 'import avro.io' >/dev/null 2>&1 || need_apt+=(python3-avro)
/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1 || need_apt+=(python3-jsonschema)
/usr/bin/python3 -c 'import google.protobuf' >/dev/null 2>&1 || need_apt+=(python3-protobuf)
# kafkajs runs on node; kafkajs-lz4's lz4 module compiles with node-gyp (make, g++, python3).
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
# The web console's browser tests (internal/server/console_browser_test.go) drive Debian's
# chromium with chromedp.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# The container image (make image, tests/k8s): buildah builds it, podman tries to run it.
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v chroot >/dev/null 2>&1 || need_apt+=(coreutils)
if [ ${#need_apt[@]} -gt 0 ]; then
	echo "tests/deps.sh: installing ${need_apt[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# npm packages for tests/interop/node, reinstalled whenever package-lock.json changes.
# kafkajs-lz4 is optional there: when its native build fails npm goes on without it and
# the suite reports kafkajs/lz4 as unsupported.
node_dir=tests/interop/node
if [ -f "$node_dir/package-lock.json" ]; then
	stamp="$node_dir/node_modules/.shale-deps-stamp"
	want=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
	if [ ! -d "$node_dir/node_modules/kafkajs" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
		echo "tests/deps.sh: installing npm packages for $node_dir"
		(cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
		echo "$want" >"$stamp"
	fi
fi
