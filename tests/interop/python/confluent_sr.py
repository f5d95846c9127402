"""confluent-kafka-python against Shale's schema registry (tests/interop/registry_test.go).

For each schema type (Avro, JSON Schema, Protobuf) this registers a first schema through
the type's serializer, evolves it with a compatible change, tries an incompatible one
through SchemaRegistryClient (which must be refused with HTTP 409, error code 409),
produces one record with each accepted version into a topic of its own, and consumes
and deserializes both back. It prints one JSON line per type:

  {"event":"type_done","type":"AVRO","topic":t,"subject":s,"ids":[id1,id2],
   "incompatible":{"status":409,"code":409},"values":[{...},{...}]}

The Go test checks these against the registry and the raw records.

Avro: Debian has no python3-fastavro, which confluent_kafka.schema_registry's
AvroSerializer needs, so Avro goes through the legacy confluent_kafka.avro
AvroProducer/AvroConsumer (CachedSchemaRegistryClient, Apache's python3-avro). JSON and
Protobuf use the current SerializingProducer/DeserializingConsumer serializers.
"""

import json
import time

from cellio import deadline, emit, load_spec, log, phase, tracing

from confluent_kafka import DeserializingConsumer, SerializingProducer
from confluent_kafka.avro import AvroConsumer, AvroProducer
from confluent_kafka.avro import loads as avro_loads
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import StringDeserializer, StringSerializer

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def refused(sr, subject, schema):
    """Registers a schema that must be incompatible; returns the status and code."""
    try:
        sid = sr.register_schema(subject, schema)
    except SchemaRegistryError as e:
        return {"status": e.http_status_code, "code": e.error_code, "message": e.error_message}
    return {"status": 200, "code": 0, "message": "registered as id %d" % sid}


def produce(spec, topic, value_serializer, values):
    p = SerializingProducer({
        "bootstrap.servers": spec["bootstrap"],
        "key.serializer": StringSerializer("utf_8"),
        "value.serializer": value_serializer,
    })
    for i, v in enumerate(values):
        p.produce(topic, key="k%d" % i, value=v)
    if p.flush(10) != 0:
        raise RuntimeError("produce to %s: records left unacknowledged" % topic)


def consume(spec, consumer, topic, n, end):
    consumer.subscribe([topic])
    out = []
    try:
        while len(out) < n:
            if time.monotonic() > end:
                raise RuntimeError("consumed %d of %d records from %s" % (len(out), n, topic))
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error():
                raise RuntimeError("consume %s: %s" % (topic, m.error()))
            out.append(m.value())
    finally:
        consumer.close()
    return out


def consumer_conf(spec, group):
    conf = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if tracing():
        conf["debug"] = "consumer,cgrp"
    return conf


# --- Avro (legacy confluent_kafka.avro) ---

AVRO_V1 = {"type": "record", "name": "User", "namespace": "shale.interop",
           "fields": [{"name": "name", "type": "string"}]}
# Compatible (BACKWARD): a new field with a default.
AVRO_V2 = {"type": "record", "name": "User", "namespace": "shale.interop",
           "fields": [{"name": "name", "type": "string"},
                      {"name": "age", "type": "int", "default": 0}]}
# Incompatible: a new field without a default cannot be read from v2 data.
AVRO_BAD = {"type": "record", "name": "User", "namespace": "shale.interop",
            "fields": [{"name": "name", "type": "string"},
                       {"name": "age", "type": "int", "default": 0},
                       {"name": "email", "type": "string"}]}


def run_avro(spec, sr, end):
    topic = spec["topic_prefix"] + "-avro"
    subject = topic + "-value"
    conf = {"bootstrap.servers": spec["bootstrap"], "schema.registry.url": spec["registry_url"]}
    ids = []
    for schema, value in ((AVRO_V1, {"name": "ada"}), (AVRO_V2, {"name": "bob", "age": 7})):
        phase("avro produce v%d" % (len(ids) + 1))
        p = AvroProducer(conf, default_value_schema=avro_loads(json.dumps(schema)))
        p.produce(topic=topic, value=value)
        if p.flush(10) != 0:
            raise RuntimeError("avro produce: records left unacknowledged")
        ids.append(sr.get_latest_version(subject).schema_id)
    phase("avro incompatible")
    bad = refused(sr, subject, Schema(json.dumps(AVRO_BAD), "AVRO"))
    # The legacy producer registers on first use and must refuse to serialize too.
    try:
        p = AvroProducer(conf, default_value_schema=avro_loads(json.dumps(AVRO_BAD)))
        p.produce(topic=topic, value={"name": "eve", "age": 1, "email": "e@x"})
        bad["producer"] = "produced"
    except Exception as e:  # SerializerError wrapping the registry's 409
        bad["producer"] = "refused: %s" % e
    phase("avro consume")
    c = AvroConsumer(dict(consumer_conf(spec, topic + "-g"), **{"schema.registry.url": spec["registry_url"]}))
    values = consume(spec, c, topic, 2, end)
    emit("type_done", type="AVRO", topic=topic, subject=subject, ids=ids, incompatible=bad, values=values)


# --- JSON Schema ---

JSON_V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
           "properties": {"name": {"type": "string"}},
           "required": ["name"], "additionalProperties": False}
# Compatible: a closed content model gains an optional property.
JSON_V2 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
           "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name"], "additionalProperties": False}
# Incompatible: name narrowed from string to integer.
JSON_BAD = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
            "properties": {"name": {"type": "integer"}, "age": {"type": "integer"}},
            "required": ["name"], "additionalProperties": False}


def run_json(spec, sr, end):
    topic = spec["topic_prefix"] + "-json"
    subject = topic + "-value"
    ids = []
    for schema, value in ((JSON_V1, {"name": "ada"}), (JSON_V2, {"name": "bob", "age": 7})):
        phase("json produce v%d" % (len(ids) + 1))
        produce(spec, topic, JSONSerializer(json.dumps(schema), sr, lambda v, ctx: v), [value])
        ids.append(sr.get_latest_version(subject).schema_id)
    phase("json incompatible")
    bad = refused(sr, subject, Schema(json.dumps(JSON_BAD), "JSON"))
    # The serializer validates against its schema before it registers: a value v2 allows
    # passes, and registration must fail.
    try:
        produce(spec, topic, JSONSerializer(json.dumps(JSON_BAD), sr, lambda v, ctx: v), [{"name": 5}])
        bad["producer"] = "produced"
    except Exception as e:
        bad["producer"] = "refused: %s" % e
    phase("json consume")
    c = DeserializingConsumer(dict(consumer_conf(spec, topic + "-g"), **{
        "key.deserializer": StringDeserializer("utf_8"),
        "value.deserializer": JSONDeserializer(json.dumps(JSON_V2), lambda v, ctx: v),
    }))
    values = consume(spec, c, topic, 2, end)
    emit("type_done", type="JSON", topic=topic, subject=subject, ids=ids, incompatible=bad, values=values)


# --- Protobuf: message classes built from descriptors at run time (no protoc step) ---

def proto_class(fields):
    """shale.interop.User with fields [(name, number, type)], in a pool of its own so
    two versions of the same message can live in one process."""
    # No json_name, as in the descriptors protoc embeds in generated _pb2 modules: that is
    # what the serializer registers for a generated class.
    fd = descriptor_pb2.FileDescriptorProto(name="shale_user.proto", package="shale.interop", syntax="proto3")
    m = fd.message_type.add(name="User")
    for name, number, typ in fields:
        m.field.add(name=name, number=number, type=typ,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("shale.interop.User")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


T = descriptor_pb2.FieldDescriptorProto
PROTO_V1 = [("name", 1, T.TYPE_STRING)]
# Compatible: a new field.
PROTO_V2 = [("name", 1, T.TYPE_STRING), ("age", 2, T.TYPE_INT32)]
# Incompatible: field 1 changes its scalar type, sent as .proto source.
PROTO_BAD = 'syntax = "proto3";\npackage shale.interop;\nmessage User {\n  int64 name = 1;\n  int32 age = 2;\n}\n'


def run_protobuf(spec, sr, end):
    topic = spec["topic_prefix"] + "-protobuf"
    subject = topic + "-value"
    V1, V2 = proto_class(PROTO_V1), proto_class(PROTO_V2)
    ids = []
    for cls, value in ((V1, V1(name="ada")), (V2, V2(name="bob", age=7))):
        phase("protobuf produce v%d" % (len(ids) + 1))
        produce(spec, topic, ProtobufSerializer(cls, sr), [value])
        ids.append(sr.get_latest_version(subject).schema_id)
    phase("protobuf incompatible")
    bad = refused(sr, subject, Schema(PROTO_BAD, "PROTOBUF"))
    phase("protobuf consume")
    c = DeserializingConsumer(dict(consumer_conf(spec, topic + "-g"), **{
        "key.deserializer": StringDeserializer("utf_8"),
        "value.deserializer": ProtobufDeserializer(V2),
    }))
    msgs = consume(spec, c, topic, 2, end)
    values = [{"name": m.name, "age": m.age} for m in msgs]
    emit("type_done", type="PROTOBUF", topic=topic, subject=subject, ids=ids, incompatible=bad, values=values)


def main():
    spec = load_spec()
    end = deadline(spec)
    sr = SchemaRegistryClient({"url": spec["registry_url"]})
    for name, run in (("AVRO", run_avro), ("JSON", run_json), ("PROTOBUF", run_protobuf)):
        if name in spec["types"]:
            log("%s start" % name)
            run(spec, sr, end)


if __name__ == "__main__":
    main()
