#!/usr/bin/env node
// kafkajs cell of the Shale interop suite. Run by tests/interop (kafkajs_test.go), not by
// hand: `node kafkajs_cell.js CELL_SPEC.json`.
//
// In "cell" mode: creates the topic with the admin client, produces the spec's records
// with the spec's codec (keys, headers, explicit timestamps, kafkajs' DefaultPartitioner:
// Java-compatible murmur2), reports each acknowledged offset, then consumes the records
// back through a consumer group (kafkajs has no other way to consume) and commits. In
// "group" mode: only the consuming part, on a topic already filled. One JSON event per
// line on stdout; logs on stderr.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, logLevel } = require('kafkajs')

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
  process.stderr.write(`kafkajs_cell: ${msg}\n`)
  exit(1)
}

// The whole cell must finish in time; the Go side kills us shortly after.
setTimeout(() => fail(`timed out after ${spec.timeout_ms} ms`), spec.timeout_ms).unref()

const emit = (event, fields) => {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n')
}

// Codecs beyond gzip come from plugin packages; tests/deps.sh installs those that build.
const codecs = {
  none: () => CompressionTypes.None,
  gzip: () => CompressionTypes.GZIP,
  snappy: () => {
    CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
    return CompressionTypes.Snappy
  },
  lz4: () => {
    const LZ4Codec = require('kafkajs-lz4')
    CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
    return CompressionTypes.LZ4
  },
  zstd: () => {
    const { ZstdCodec } = require('@kafkajs/zstd')
    CompressionCodecs[CompressionTypes.ZSTD] = ZstdCodec()
    return CompressionTypes.ZSTD
  },
}

// SHALE_INTEROP_TRACE=1 logs the phases with their times, to see where a slow cell waits.
const started = Date.now()
const trace = (what) => {
  if (process.env.SHALE_INTEROP_TRACE) process.stderr.write(`kafkajs_cell: +${Date.now() - started}ms ${what}\n`)
}

const toBuffer = (s) => (s === null ? null : Buffer.from(s, 'utf8'))
const toStr = (b) => (b === null || b === undefined ? null : b.toString('utf8'))

const logToStderr = () => ({ namespace, level, label, log }) => {
  const { message, ...rest } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(rest)}\n`)
}

async function main () {
  const kafka = new Kafka({
    clientId: 'shale-interop-kafkajs',
    brokers: spec.bootstrap.split(','),
    logLevel: logLevel.WARN,
    logCreator: logToStderr,
    retry: { retries: 8, initialRetryTime: 100 },
  })
  if (spec.mode !== 'group') await createAndProduce(kafka)
  await consume(kafka)
}

async function createAndProduce (kafka) {
  if (!(spec.codec in codecs)) fail(`unknown codec ${spec.codec}`)
  const compression = codecs[spec.codec]()

  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({
    topics: [{ topic: spec.topic, numPartitions: spec.partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 10000,
  })
  await admin.disconnect()
  trace('topic created')
  if (!created) fail(`createTopics reported ${spec.topic} as already existing`)

  // The default partitioner, wrapped to learn where each message went, so that each
  // partition's acknowledged base offset can be spread over its messages in send order.
  const placed = new Map()
  const createPartitioner = () => {
    const inner = Partitioners.DefaultPartitioner()
    return (args) => {
      const p = inner(args)
      placed.set(args.message, p)
      return p
    }
  }
  // Idempotent, one request in flight: what keeps a partition's order across retries.
  const producer = kafka.producer({ createPartitioner, allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const chunk = 40
  for (let i = 0; i < spec.records.length; i += chunk) {
    const recs = spec.records.slice(i, i + chunk)
    const messages = recs.map((r) => {
      const headers = {}
      for (const [k, v] of r.headers) headers[k] = toBuffer(v)
      const m = { key: toBuffer(r.key), value: toBuffer(r.value), headers }
      if (r.timestamp) m.timestamp = String(r.timestamp)
      return m
    })
    const acks = await producer.send({ topic: spec.topic, compression, acks: -1, messages })
    const base = new Map(acks.map((a) => [a.partition, BigInt(a.baseOffset)]))
    const next = new Map()
    messages.forEach((m, j) => {
      const p = placed.get(m)
      if (p === undefined || !base.has(p)) fail(`no acknowledgement for record #${recs[j].index}`)
      const k = next.get(p) || 0n
      next.set(p, k + 1n)
      emit('produced', { index: recs[j].index, partition: p, offset: Number(base.get(p) + k) })
    })
  }
  await producer.disconnect()
  emit('produced_all', {})
  trace('produced')
}

async function consume (kafka) {
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 250,
  })
  // A crash kafkajs will not restart from would otherwise leave us waiting to time out.
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    process.stderr.write(`kafkajs_cell: consumer crashed (restart: ${payload.restart}): ${payload.error && payload.error.stack}\n`)
    if (!payload.restart) fail(`consumer crashed for good: ${payload.error}`)
  })
  await consumer.connect()
  trace('consumer connected')
  await consumer.subscribe({ topics: [spec.topic], fromBeginning: true })
  const want = spec.records.length
  let got = 0
  const last = new Map()
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (got >= want) return
      if (got === 0) trace('first record')
      const headers = Object.entries(message.headers || {}).map(([k, v]) => [k, toStr(v)])
      emit('consumed', {
        partition,
        offset: Number(message.offset),
        key: toStr(message.key),
        value: toStr(message.value),
        headers,
        timestamp: Number(message.timestamp),
        timestamp_type: '',
      })
      last.set(partition, BigInt(message.offset))
      got++
      if (got === want) done()
    },
  })
  await finished
  trace('all consumed')
  await consumer.commitOffsets([...last].map(([partition, off]) => ({
    topic: spec.topic, partition, offset: String(off + 1n),
  })))
  trace('committed')
  await consumer.disconnect()
  trace('disconnected')
}

main().then(() => exit(0), (err) => fail(err && err.stack ? err.stack : String(err)))
