"""A kafka-python consumer reads a topic holding committed and aborted transactions.
kafka-python 2.0.2 has no isolation_level (it came in 2.0.3): it reads uncommitted and
does not skip control batches either (against Kafka too): their records (key: version 0
and type 0 abort or 1 commit; value: version 0 and the coordinator epoch) are counted
apart. Newer versions also read with read_committed. Prints one JSON object with the
values seen ("read_committed" is null when unsupported) and the markers counted."""
import json
import sys
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaConfigurationError

bootstrap, topic, partitions, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def read(isolation, want):
    opts = dict(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    if isolation is not None:
        opts["isolation_level"] = isolation
    c = KafkaConsumer(**opts)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    seen, markers = [], 0
    deadline = time.time() + 30
    quiet_until = None
    while time.time() < deadline:
        if len(seen) >= want and quiet_until is None:
            quiet_until = time.time() + 1
        if quiet_until is not None and time.time() > quiet_until:
            break
        for recs in c.poll(timeout_ms=200).values():
            for r in recs:
                if r.key in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01") and len(r.value) == 6:
                    markers += 1
                else:
                    seen.append(r.value.decode())
    c.close()
    return sorted(seen), markers


everything, markers = read(None, want)
try:
    committed, _ = read("read_committed", want)
except KafkaConfigurationError:
    committed = None
print(json.dumps({"read_committed": committed, "read_uncommitted": everything, "markers": markers}))
