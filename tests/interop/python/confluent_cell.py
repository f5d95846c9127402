#!/usr/bin/python3
"""confluent-kafka-python (librdkafka) cell of the Shale interop suite.

Creates the topic with AdminClient, produces the spec's records with the spec's codec
(keys, headers, explicit timestamps, librdkafka's default consistent_random partitioner),
reports each delivery, then consumes them back through a consumer group and commits.
Run by tests/interop (python_test.go), not by hand.
"""

import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import cellio

TIMESTAMP_TYPES = {
    confluent_kafka.TIMESTAMP_CREATE_TIME: "create",
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: "append",
}


def create_topic(spec, deadline):
    admin = AdminClient({"bootstrap.servers": spec["bootstrap"], "client.id": "shale-interop-confluent"})
    futures = admin.create_topics(
        [NewTopic(spec["topic"], num_partitions=spec["partitions"], replication_factor=1)],
        operation_timeout=10,
        request_timeout=max(1.0, deadline - time.monotonic()),
    )
    futures[spec["topic"]].result()


def produce(spec, deadline):
    producer = Producer({
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "shale-interop-confluent",
        "compression.codec": spec["codec"],
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 40,
    })
    failures = []

    def on_delivery(index):
        def report(err, msg):
            if err is not None:
                failures.append("record #%d: %s" % (index, err))
                return
            cellio.emit("produced", index=index, partition=msg.partition(), offset=msg.offset())
        return report

    for r in spec["records"]:
        kwargs = {
            "key": cellio.to_bytes(r["key"]),
            "value": cellio.to_bytes(r["value"]),
            "headers": [(k, cellio.to_bytes(v)) for k, v in r["headers"]],
            "on_delivery": on_delivery(r["index"]),
        }
        if r["timestamp"]:
            kwargs["timestamp"] = r["timestamp"]
        producer.produce(spec["topic"], **kwargs)
        producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    if remaining:
        raise SystemExit("%d records still undelivered at the deadline" % remaining)
    if failures:
        raise SystemExit("delivery failed: " + "; ".join(failures[:10]))
    cellio.emit("produced_all")


def consume(spec, deadline):
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "shale-interop-confluent",
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    })
    consumer.subscribe([spec["topic"]])
    want = len(spec["records"])
    got = 0
    try:
        while got < want:
            if time.monotonic() > deadline:
                raise SystemExit("consumed %d of %d records by the deadline" % (got, want))
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            ts_type, ts = msg.timestamp()
            cellio.emit_consumed(
                msg.partition(), msg.offset(), msg.key(), msg.value(),
                msg.headers(), ts, TIMESTAMP_TYPES.get(ts_type, ""),
            )
            got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def main():
    spec = cellio.load_spec()
    deadline = cellio.deadline(spec)
    create_topic(spec, deadline)
    produce(spec, deadline)
    consume(spec, deadline)


if __name__ == "__main__":
    main()
