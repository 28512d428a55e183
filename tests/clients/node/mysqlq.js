'use strict';
// mysqlq from Node.js with mysql2. docs/clients.md shows this code; tests/clients runs it.

const mysql = require('mysql2/promise');

// Connect with utf8mb4 (mysql2's default too), so that emoji and every other character
// travel intact whatever the database's default character set is.
function connect(uri) {
  return mysql.createConnection({ uri, charset: 'utf8mb4' });
}

// CALL a mysqlq procedure and return the rows of its result set. execute() prepares the
// statement on the server (binary protocol), query() fills in the values on the client;
// both work. A CALL answers [rows, ResultSetHeader]: the rows are the first element.
async function call(conn, proc, args, { prepared = true } = {}) {
  const sql = `CALL ${proc}(${args.map(() => '?').join(', ')})`;
  const [results] = prepared ? await conn.execute(sql, args) : await conn.query(sql, args);
  return results[0];
}

// Publish one message. payload: a Buffer (stored byte for byte) or a string (stored as
// UTF-8). Returns { offset, duplicate, partition_id, id }.
async function publish(conn, topic, payload, options = {}) {
  const { key = null, id = null, metadata = null, delayMs = 0, prepared } = options;
  const meta = metadata === null ? null : JSON.stringify(metadata);
  const args = [topic, key, id, Buffer.from(payload), meta, delayMs];
  const [row] = await call(conn, 'queue_publish', args, { prepared });
  return row;
}

// Publish many messages in one round trip (and one transaction). Returns one row per
// message, { idx, offset, duplicate, partition_id, id }, in order. Give every message an
// id: a retry after a lost connection then returns the first offsets, and stores nothing twice.
async function publishBatch(conn, topic, messages, { prepared } = {}) {
  const elements = messages.map((m) => ({
    key: m.key ?? null,
    id: m.id ?? null,
    payload_b64: Buffer.from(m.payload).toString('base64'),
    metadata: m.metadata ?? null,
    delay_ms: m.delayMs ?? 0,
  }));
  return call(conn, 'queue_publish_batch', [topic, JSON.stringify(elements)], { prepared });
}

// Thrown by a handler for a message that can never succeed: it goes to the DLQ at once.
class PoisonMessage extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A consumer of `topic` in consumer group `group`, as docs/protocol.md ("A consumer's loop")
// describes it. handle(msg) gets each fetch row ({ partition_id, offset, token, attempt,
// partition_key, id, payload (a Buffer), metadata (JSON text or null), ... }): it returns to
// ack, throws to nack (after maxAttempts attempts the nack moves the message to the group's
// DLQ, `<topic>_dlq`), or throws PoisonMessage to dead-letter it now. Runs until `signal`
// aborts, then leaves the group.
async function consume(conn, {
  group,
  topic,
  handle,
  signal,
  me = `node-${process.pid}-${Math.random().toString(36).slice(2)}`,
  maxAttempts = 5,
  leaseMs = 30000,
  visibilityMs = 60000,
  batchSize = 10,
  backoffMs = (attempt) => Math.min(1000 * 2 ** attempt, 300000),
  idleMs = 100,
  prepared = true,
}) {
  const q = (proc, args) => call(conn, proc, args, { prepared });
  await q('queue_subscribe', [group, topic, me, maxAttempts, null, leaseMs, null]);
  let nextTick = 0;
  try {
    while (!signal.aborted) {
      if (Date.now() >= nextTick) { // the lease tick: takes this consumer's share of partitions
        await q('queue_acquire_leases', [group, topic, me, leaseMs, null]);
        nextTick = Date.now() + leaseMs / 3;
      }
      const rows = await q('queue_fetch', [group, topic, me, batchSize, visibilityMs, 100, null]);
      if (rows.length === 0) {
        await sleep(idleMs);
        continue;
      }
      const acked = [];
      for (const msg of rows) { // in (partition_id, offset) order: one key's messages in order
        const delivery = [msg.partition_id, msg.offset, msg.token];
        try {
          await handle(msg);
          acked.push(delivery);
        } catch (err) {
          // p_error holds up to 65535 bytes: 10000 characters always fit
          const error = Array.from(String(err && err.message)).slice(0, 10000).join('');
          if (err instanceof PoisonMessage) {
            await q('queue_dead_letter', [group, JSON.stringify([delivery]), error, null]);
          } else {
            const delayMs = backoffMs(msg.attempt);
            await q('queue_nack', [group, JSON.stringify([delivery]), delayMs, error, null]);
          }
        }
      }
      if (acked.length > 0) {
        await q('queue_ack', [group, JSON.stringify(acked), null]);
      }
    }
  } finally {
    await q('queue_deregister', [group, topic, me, null]);
  }
}

// Errors raised by the procedures are SQLSTATE 45000 (errno 1644) with a message that starts
// with a stable code: 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first'.
function mysqlqCode(err) {
  const match = err && err.errno === 1644 && /^(MQ\d{3}) /.exec(err.sqlMessage || '');
  return match ? match[1] : null;
}

module.exports = { connect, call, publish, publishBatch, consume, PoisonMessage, mysqlqCode };
