#!/usr/bin/env bash
# Brings what the test suites need when it is missing: Go modules, and the real Kafka
# clients the interop suite drives (Debian's kcat, confluent-kafka-python and
# kafka-python; npm's kafkajs). Safe to run again: it installs only what is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || need_apt+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || need_apt+=(python3-kafka)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
	echo "tests/deps.sh: installing ${need_apt[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ -f tests/interop/node/package.json ] && [ ! -d tests/interop/node/node_modules/kafkajs ]; then
	echo "tests/deps.sh: installing npm packages for tests/interop/node"
	(cd tests/interop/node && npm ci --no-audit --no-fund --silent 2>/dev/null || npm install --no-audit --no-fund --silent)
fi
