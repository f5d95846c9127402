"""The librdkafka half of TestChaosTransactions: a consume-transform-produce pipeline.

Reads the input topic read_committed in a consumer group, and copies each batch of records
to the same partition of the output topic in one transaction that also commits the group's
offsets (send_offsets_to_transaction). After each transaction it prints "commit <txn>" or
"abort <txn>", which the test's checker reads. An abortable error aborts the transaction
and rewinds the consumer to the group's committed offsets, the pattern librdkafka
documents; a fatal one (a newer instance fenced this one) ends the process, and the test
starts another.

usage: txn_pipeline.py seeds in out group transactional_id instance pause_seconds
"""

import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer

seeds, in_topic, out_topic, group, txn_id, instance, pause = sys.argv[1:8]
pause = float(pause)

stopping = False


def stop(*_):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)

consumer = Consumer({
    "bootstrap.servers": seeds,
    "group.id": group,
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "socket.connection.setup.timeout.ms": 3000,
})
producer = Producer({
    "bootstrap.servers": seeds,
    "transactional.id": txn_id,
    "transaction.timeout.ms": 10000,
    "socket.connection.setup.timeout.ms": 3000,
})


def log(line):
    print(line, flush=True)


def rewind():
    """Seeks every assigned partition back to the group's committed offset."""
    assigned = consumer.assignment()
    if not assigned:
        return
    for tp in consumer.committed(assigned, timeout=30):
        if tp.offset < 0:
            tp.offset = -2  # OFFSET_BEGINNING: nothing committed yet
        consumer.seek(tp)


producer.init_transactions(60)
consumer.subscribe([in_topic])
n = 0
while not stopping:
    msgs = consumer.consume(num_messages=20, timeout=0.5)
    batch = []
    for m in msgs:
        if m.error() is not None:
            log("consume error: %s" % m.error())
            continue
        batch.append(m)
    if not batch:
        continue
    n += 1
    txn = "%s-%d" % (instance, n)
    try:
        producer.begin_transaction()
        for m in batch:
            producer.produce(out_topic, value=m.value(), key=m.key(), partition=m.partition(),
                             headers=[("txn", txn.encode()), ("n", str(len(batch)).encode())])
        time.sleep(pause)
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        log("commit %s" % txn)
    except KafkaException as e:
        err = e.args[0]
        log("transaction %s failed: %s" % (txn, err))
        if err.fatal():
            sys.exit(3)
        if err.txn_requires_abort():
            producer.abort_transaction(30)
            log("abort %s" % txn)
            rewind()
        elif err.retriable():
            # The commit's outcome is unknown: librdkafka retries commit_transaction.
            try:
                producer.commit_transaction(30)
                log("commit %s" % txn)
            except KafkaException as e2:
                log("retried commit of %s failed: %s" % (txn, e2.args[0]))
                sys.exit(4)
        else:
            sys.exit(5)

consumer.close()
producer.flush(10)
