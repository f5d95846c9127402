"""Shared I/O for the interop suite's Python client scripts.

A script reads the cell spec (JSON, see tests/interop/subprocess_test.go) from the file
named by its last argument and prints one JSON event per line on stdout; everything else
goes to stderr.
"""

import json
import os
import sys
import threading
import time


def load_spec():
    if len(sys.argv) < 2:
        sys.exit("usage: %s CELL_SPEC.json" % sys.argv[0])
    with open(sys.argv[-1]) as f:
        return json.load(f)


_phase = ["start"]


def phase(name):
    """Names what the script is doing, for the watchdog's message."""
    _phase[0] = name


def deadline(spec):
    """Monotonic time by which the script must be done. A watchdog ends the process a
    second after it, naming the phase it was stuck in: some client calls block past any
    timeout they are given (kafka-python's poll() while no group coordinator is found)."""
    timeout = spec["timeout_ms"] / 1000.0

    def expire():
        log("still in phase %r %.0f s after start: giving up" % (_phase[0], timeout + 1))
        os._exit(3)

    t = threading.Timer(timeout + 1, expire)
    t.daemon = True
    t.start()
    return time.monotonic() + timeout


def to_bytes(s):
    return None if s is None else s.encode("utf-8")


def to_str(b):
    if b is None:
        return None
    if isinstance(b, str):
        return b
    return bytes(b).decode("utf-8", errors="surrogateescape")


def emit(event, **fields):
    fields["event"] = event
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def emit_consumed(partition, offset, key, value, headers, timestamp, timestamp_type):
    emit(
        "consumed",
        partition=partition,
        offset=offset,
        key=to_str(key),
        value=to_str(value),
        headers=[[k, to_str(v)] for k, v in (headers or [])],
        timestamp=timestamp,
        timestamp_type=timestamp_type,
    )


def tracing():
    """SHALE_INTEROP_TRACE set: the scripts turn on their client's debug logging."""
    return bool(os.environ.get("SHALE_INTEROP_TRACE"))


def log(msg):
    sys.stderr.write("%s: %s\n" % (sys.argv[0].rsplit("/", 1)[-1], msg))
    sys.stderr.flush()
