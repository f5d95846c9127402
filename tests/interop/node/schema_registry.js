#!/usr/bin/env node
// npm's @kafkajs/confluent-schema-registry against Shale's schema registry. Run by
// tests/interop (registry_test.go), not by hand: `node schema_registry.js SPEC.json`.
//
// For each schema type (Avro, JSON Schema, Protobuf): registers a first schema, evolves it
// with a compatible change, tries an incompatible one (which must be refused with HTTP
// 409), encodes one record with each accepted version, produces them with kafkajs into a
// topic of its own, consumes them back through a consumer group and decodes them (the
// library fetches each record's schema by the id it carries). One JSON line per type on
// stdout, the same shape as python/confluent_sr.py's:
//   {"event":"type_done","type":"AVRO","topic":t,"subject":s,"ids":[id1,id2],
//    "incompatible":{"status":409,"message":...},"values":[{...},{...}]}
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

const spec = JSON.parse(fs.readFileSync(process.argv[process.argv.length - 1], 'utf8'))

// Writes to a pipe are asynchronous in Node on POSIX: process.exit drops what stdout and
// stderr still queue when the Go side reads slowly (a loaded machine), cutting the last
// line in two. exit ends the process once both have handed everything to the kernel.
const exit = (code) => {
  let pending = 2
  const flushed = () => { if (--pending === 0) process.exit(code) }
  process.stdout.write('', flushed)
  process.stderr.write('', flushed)
}

const fail = (msg) => {
  process.stderr.write(`schema_registry.js: ${msg}\n`)
  exit(1)
}
setTimeout(() => fail(`timed out after ${spec.timeout_ms} ms`), spec.timeout_ms).unref()

const emit = (event, fields) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n')
const log = (msg) => process.stderr.write(`schema_registry.js: ${msg}\n`)

const record = (fields) => JSON.stringify({ type: 'record', name: 'User', namespace: 'shale.interop', fields })
const jsonUser = (properties) => JSON.stringify({
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'User',
  type: 'object',
  properties,
  required: ['name'],
  additionalProperties: false,
})
const proto = (fields) => `syntax = "proto3";\npackage shale.interop;\nmessage User {\n${fields}\n}\n`

// Per type: v1, a compatible v2, an incompatible change, and a value for v1 and for v2.
const cases = {
  AVRO: {
    type: SchemaType.AVRO,
    v1: record([{ name: 'name', type: 'string' }]),
    // BACKWARD: a new field with a default.
    v2: record([{ name: 'name', type: 'string' }, { name: 'age', type: 'int', default: 0 }]),
    // A new field without a default cannot be read from v2 data.
    bad: record([{ name: 'name', type: 'string' }, { name: 'age', type: 'int', default: 0 }, { name: 'email', type: 'string' }]),
  },
  JSON: {
    type: SchemaType.JSON,
    // A closed content model may gain an optional property.
    v1: jsonUser({ name: { type: 'string' } }),
    v2: jsonUser({ name: { type: 'string' }, age: { type: 'integer' } }),
    // name narrowed from string to integer.
    bad: jsonUser({ name: { type: 'integer' }, age: { type: 'integer' } }),
  },
  PROTOBUF: {
    type: SchemaType.PROTOBUF,
    v1: proto('  string name = 1;'),
    // A new field.
    v2: proto('  string name = 1;\n  int32 age = 2;'),
    // Field 1 changes its scalar type.
    bad: proto('  int64 name = 1;\n  int32 age = 2;'),
  },
}
const values = [{ name: 'ada' }, { name: 'bob', age: 7 }]

const plain = (v) => {
  // Protobuf decodes to a protobufjs message; Avro to a record object: compare as JSON.
  if (v && typeof v.toJSON === 'function') return v.toJSON()
  return JSON.parse(JSON.stringify(v))
}

async function runType(kafka, registry, name) {
  const c = cases[name]
  const topic = `${spec.topic_prefix}-${name.toLowerCase()}`
  const subject = `${topic}-value`
  const ids = []
  for (const schema of [c.v1, c.v2]) {
    const { id } = await registry.register({ type: c.type, schema }, { subject })
    ids.push(id)
  }
  let incompatible
  try {
    const { id } = await registry.register({ type: c.type, schema: c.bad }, { subject })
    incompatible = { status: 200, message: `registered as id ${id}` }
  } catch (e) {
    incompatible = { status: e.status || 0, message: String(e.message) }
  }

  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const messages = []
  for (let i = 0; i < values.length; i++) {
    messages.push({ key: `k${i}`, value: await registry.encode(ids[i], values[i]) })
  }
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: `${topic}-g` })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        try {
          got.push(plain(await registry.decode(message.value)))
        } catch (e) {
          reject(e)
        }
        if (got.length >= values.length) resolve()
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  emit('type_done', { type: name, topic, subject, ids, incompatible, values: got })
}

async function main() {
  const kafka = new Kafka({
    clientId: 'shale-interop-sr',
    brokers: spec.bootstrap.split(','),
    logLevel: logLevel.ERROR,
    logCreator: () => ({ level, log: entry }) => log(`kafkajs ${level}: ${entry.message}`),
  })
  const registry = new SchemaRegistry({ host: spec.registry_url })
  for (const name of spec.types) {
    log(`${name} start`)
    await runType(kafka, registry, name)
  }
}

main().then(() => exit(0), (e) => fail(e && e.stack ? e.stack : String(e)))
