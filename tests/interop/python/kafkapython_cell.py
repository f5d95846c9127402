#!/usr/bin/python3
"""kafka-python cell of the Shale interop suite.

In "cell" mode: creates the topic with KafkaAdminClient, produces the spec's records with
the spec's codec (keys, headers, explicit timestamps, kafka-python's default murmur2
partitioner), reports each acknowledgement, then reads every partition back from the
beginning with assign() and no group. In "group" mode: consumes the (already filled) topic
through a consumer group and commits. Run by tests/interop (python_test.go), not by hand.
"""

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

import cellio

CLIENT_ID = "shale-interop-kafka-python"


def create_topic(spec):
    admin = KafkaAdminClient(bootstrap_servers=spec["bootstrap"], client_id=CLIENT_ID, request_timeout_ms=15000)
    try:
        resp = admin.create_topics(
            [NewTopic(spec["topic"], num_partitions=spec["partitions"], replication_factor=1)],
            timeout_ms=10000,
        )
        for topic, code, *rest in resp.topic_errors:
            if code != 0:
                raise SystemExit("CreateTopics %s: error code %d %s" % (topic, code, rest))
    finally:
        admin.close()


def produce(spec, deadline):
    codec = None if spec["codec"] == "none" else spec["codec"]
    producer = KafkaProducer(
        bootstrap_servers=spec["bootstrap"],
        client_id=CLIENT_ID,
        compression_type=codec,
        acks="all",
        # kafka-python has no idempotent producer: one request in flight is what keeps
        # a partition's order across retries. Its default of no retries fails a send on
        # the first NOT_LEADER_OR_FOLLOWER, which a broker may answer for a moment after
        # creating a topic (see MATRIX.md).
        max_in_flight_requests_per_connection=1,
        retries=3,
        linger_ms=5,
        batch_size=16384,
    )
    failures = []
    futures = []
    for r in spec["records"]:
        fut = producer.send(
            spec["topic"],
            key=cellio.to_bytes(r["key"]),
            value=cellio.to_bytes(r["value"]),
            headers=[(k, cellio.to_bytes(v)) for k, v in r["headers"]],
            timestamp_ms=r["timestamp"] or None,
        )
        futures.append((r["index"], fut))
    producer.flush(timeout=max(1.0, deadline - time.monotonic()))
    for index, fut in futures:
        try:
            md = fut.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception as e:  # any failure is the cell's failure, reported below
            failures.append("record #%d: %r" % (index, e))
            continue
        cellio.emit("produced", index=index, partition=md.partition, offset=md.offset)
    producer.close(timeout=5)
    if failures:
        raise SystemExit("delivery failed: " + "; ".join(failures[:10]))
    cellio.emit("produced_all")


TIMESTAMP_TYPES = {0: "create", 1: "append"}


def consume(spec, deadline, group):
    """Reads len(records) records: through the group if group, else by assigning every
    partition from the beginning without a group."""
    kwargs = dict(
        bootstrap_servers=spec["bootstrap"],
        client_id=CLIENT_ID,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    if group:
        consumer = KafkaConsumer(
            spec["topic"], group_id=spec["group"], session_timeout_ms=10000, heartbeat_interval_ms=1000, **kwargs)
    else:
        consumer = KafkaConsumer(group_id=None, **kwargs)
        parts = [TopicPartition(spec["topic"], p) for p in range(spec["partitions"])]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
    want = len(spec["records"])
    got = 0
    try:
        while got < want:
            if time.monotonic() > deadline:
                raise SystemExit("consumed %d of %d records by the deadline" % (got, want))
            batches = consumer.poll(timeout_ms=500)
            for records in batches.values():
                for m in records:
                    cellio.emit_consumed(
                        m.partition, m.offset, m.key, m.value, m.headers,
                        m.timestamp, TIMESTAMP_TYPES.get(m.timestamp_type, ""),
                    )
                    got += 1
        if group:
            consumer.commit()
    finally:
        consumer.close()


def main():
    spec = cellio.load_spec()
    deadline = cellio.deadline(spec)
    if spec["mode"] == "group":
        cellio.phase("consume through a group")
        consume(spec, deadline, group=True)
        return
    cellio.phase("create topic")
    create_topic(spec)
    cellio.phase("produce")
    produce(spec, deadline)
    cellio.phase("consume by assignment")
    consume(spec, deadline, group=False)


if __name__ == "__main__":
    main()
