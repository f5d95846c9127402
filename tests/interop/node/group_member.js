#!/usr/bin/env node
// One long-running kafkajs consumer-group member for the interop suite's rebalance
// scenarios (group_rebalance_test.go). Run by the suite, not by hand:
// `node group_member.js MEMBER_SPEC.json`.
//
// It subscribes to the spec's topic in the spec's group and prints every record it
// consumes as {"event":"consumed","partition":p,"offset":o,"value":v}; kafkajs commits an
// offset only after eachMessage resolved for it, i.e. after the line was written
// (at-least-once). SIGTERM disconnects (commit, LeaveGroup); SIGKILL is how the suite
// makes it vanish.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const spec = JSON.parse(fs.readFileSync(process.argv[process.argv.length - 1], 'utf8'))

const log = (msg) => process.stderr.write(`group_member.js: ${msg}\n`)

// Writes to a pipe are asynchronous in Node on POSIX: process.exit drops what stdout and
// stderr still queue when the Go side reads slowly (a loaded machine), cutting the last
// line in two. exit ends the process once both have handed everything to the kernel.
const exit = (code) => {
  let pending = 2
  const flushed = () => { if (--pending === 0) process.exit(code) }
  process.stdout.write('', flushed)
  process.stderr.write('', flushed)
}

const kafka = new Kafka({
  clientId: 'shale-interop-group-kafkajs',
  brokers: spec.bootstrap.split(','),
  logLevel: process.env.SHALE_INTEROP_TRACE ? logLevel.DEBUG : logLevel.WARN,
  logCreator: () => ({ level, log: entry }) => {
    const { message, ...rest } = entry
    process.stderr.write(`kafkajs ${level}: ${message} ${JSON.stringify(rest)}\n`)
  },
  retry: { initialRetryTime: 100, retries: 30 },
})

const main = async () => {
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: spec.session_timeout_ms,
    rebalanceTimeout: 20000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200,
  })
  let stopping = false
  process.on('SIGTERM', async () => {
    if (stopping) return
    stopping = true
    try {
      await consumer.disconnect()
    } catch (e) {
      log(`disconnect: ${e}`)
    }
    exit(0)
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    log(`consumer crashed (restart: ${payload.restart}): ${payload.error && payload.error.stack}`)
    if (!payload.restart) exit(1)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [spec.topic], fromBeginning: true })
  await consumer.run({
    autoCommitInterval: 200,
    eachMessage: async ({ partition, message }) => {
      const value = message.value === null ? null : message.value.toString('utf8')
      // Resolved once the line is in the pipe, not just queued: a SIGKILL must not lose
      // the line of a record whose offset kafkajs then commits.
      await new Promise((resolve) => {
        process.stdout.write(JSON.stringify({ event: 'consumed', partition, offset: Number(message.offset), value }) + '\n', resolve)
      })
    },
  })
}

main().catch((e) => {
  log(e.stack || String(e))
  exit(1)
})
