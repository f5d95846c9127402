#!/usr/bin/python3
"""confluent-kafka-python (librdkafka) cell of the Shale interop suite.

In "cell" mode: creates the topic with AdminClient, produces the spec's records with the
spec's codec (keys, headers, explicit timestamps, librdkafka's default consistent_random
partitioner), reports each delivery, then reads every partition back from the beginning
with assign(). In "group" mode: consumes the (already filled) topic through a consumer
group with subscribe() and commits. Run by tests/interop (python_test.go), not by hand.
"""

import time

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
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


def debug_conf():
    return {"debug": "msg,protocol,topic,broker"} if cellio.tracing() else {}


def produce(spec, deadline):
    producer = Producer({
        **debug_conf(),
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "shale-interop-confluent",
        "compression.codec": spec["codec"],
        "acks": "all",
        # Kafka keeps a partition's order across retries only for idempotent producers
        # (or one request in flight); librdkafka's default is neither.
        "enable.idempotence": True,
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


def consume(spec, deadline, group):
    """Reads len(records) records: through the group if group, else by assigning every
    partition from the beginning (librdkafka insists on a group.id even then, but does not
    join the group)."""
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "shale-interop-confluent",
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "session.timeout.ms": 10000,
    })
    if group:
        consumer.subscribe([spec["topic"]])
    else:
        consumer.assign([TopicPartition(spec["topic"], p, OFFSET_BEGINNING) for p in range(spec["partitions"])])
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
            if group:
                consumer.store_offsets(msg)
            got += 1
        if group:
            consumer.commit(asynchronous=False)
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
    create_topic(spec, deadline)
    cellio.phase("produce")
    produce(spec, deadline)
    cellio.phase("consume by assignment")
    consume(spec, deadline, group=False)


if __name__ == "__main__":
    main()
