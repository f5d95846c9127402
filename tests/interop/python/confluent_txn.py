"""Transactions with confluent-kafka-python (librdkafka): a committed and an aborted
transaction to a topic, a read_committed consumer, and offsets sent to a transaction.
Prints one JSON object: what the consumer saw and the group's committed offsets."""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, txn_id, group = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
p.init_transactions(30)
p.begin_transaction()
for i in range(10):
    p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
p.commit_transaction(30)
p.begin_transaction()
for i in range(5):
    p.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
p.abort_transaction(30)

c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
seen = []
deadline = time.time() + 30
quiet_until = None
while time.time() < deadline:
    if len(seen) >= 10 and quiet_until is None:
        quiet_until = time.time() + 1
    if quiet_until is not None and time.time() > quiet_until:
        break
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    seen.append(m.value().decode())

# Consume-transform-produce: the consumer's positions commit with the transaction.
p.begin_transaction()
p.produce(topic, value=b"with-offsets", partition=0)
p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
p.commit_transaction(30)
committed = {str(tp.partition): tp.offset for tp in c.committed(c.assignment(), 30)}
c.close()
print(json.dumps({"seen": sorted(seen), "committed": committed}))
