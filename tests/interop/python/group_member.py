#!/usr/bin/python3
"""One long-running consumer-group member for the interop suite's rebalance scenarios
(group_rebalance_test.go): kafka-python or confluent-kafka-python, as the spec's "client"
says.

It subscribes to the spec's topic in the spec's group and prints every record it consumes
as {"event":"consumed","partition":p,"offset":o,"value":v}, and commits only offsets of
records it has printed (at-least-once). SIGTERM makes it close the consumer, which commits
and leaves the group; SIGKILL is how the suite makes it vanish. Run by the suite, not by
hand.
"""

import signal
import sys

import cellio

stopping = [False]


def on_term(signum, frame):
    stopping[0] = True


def run_kafka_python(spec):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        spec["topic"],
        bootstrap_servers=spec["bootstrap"],
        client_id="shale-interop-group-kafka-python",
        group_id=spec["group"],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=spec["session_timeout_ms"],
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=200,
    )
    try:
        while not stopping[0]:
            batches = consumer.poll(timeout_ms=200)
            n = 0
            for records in batches.values():
                for m in records:
                    cellio.emit("consumed", partition=m.partition, offset=m.offset, value=cellio.to_str(m.value))
                    n += 1
            if n:
                # Commits the positions of what poll() returned, all printed above. A
                # commit refused because of a rebalance is retried by the next one.
                try:
                    consumer.commit()
                except Exception as e:  # CommitFailedError during a rebalance
                    cellio.log("commit failed: %r" % (e,))
    finally:
        consumer.close()


def run_confluent(spec):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "shale-interop-group-confluent",
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        # Only offsets stored below (of printed records) are committed.
        "enable.auto.offset.store": False,
        "session.timeout.ms": spec["session_timeout_ms"],
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 200,
    }
    if cellio.tracing():
        conf["debug"] = "cgrp,protocol"
    consumer = Consumer(conf)
    consumer.subscribe([spec["topic"]])
    try:
        while not stopping[0]:
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error():
                cellio.log("consume error: %s" % m.error())
                continue
            cellio.emit("consumed", partition=m.partition(), offset=m.offset(), value=cellio.to_str(m.value()))
            consumer.store_offsets(message=m)
    finally:
        consumer.close()


def main():
    spec = cellio.load_spec()
    signal.signal(signal.SIGTERM, on_term)
    client = spec["client"]
    if client == "kafka-python":
        run_kafka_python(spec)
    elif client == "confluent-kafka-python":
        run_confluent(spec)
    else:
        sys.exit("unknown client %r" % client)


if __name__ == "__main__":
    main()
