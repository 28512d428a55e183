'use strict';
// The Node side of tests/clients: `node rpc.js URI query|execute` reads one JSON request a
// line on stdin and answers one JSON line on stdout, through the code of mysqlq.js.
//   {"op": "call", "proc": "queue_fetch", "args": [...]}       -> rows of the result set
//   {"op": "query", "sql": "SELECT ...", "args": [...]}         -> rows
//   {"op": "publish", "topic": ..., "payload": ..., "key": ..., "id": ..., "metadata": {...}}
//   {"op": "publish_batch", "topic": ..., "messages": [{key, id, payload, metadata}]}
//   {"op": "consume", "group", "topic", "max_attempts", "fail_ids", "poison_ids", "error",
//    "expect", "timeout_ms"}                                    -> {"handled": [rows], "timed_out"}
// Bytes travel as {"$b64": "..."} both ways. An error answers
// {"error": {"errno", "sqlstate", "message", "code"}} (code: mysqlqCode, the MQnnn prefix).

const readline = require('node:readline');
const { connect, call, publish, publishBatch, consume, PoisonMessage, mysqlqCode } = require('./mysqlq');

const [uri, mode] = process.argv.slice(2);
if (!uri || !['query', 'execute'].includes(mode)) {
  process.stderr.write('usage: node rpc.js URI query|execute\n');
  process.exit(2);
}
const prepared = mode === 'execute';

const decode = (v) => {
  if (Array.isArray(v)) return v.map(decode);
  if (v && typeof v === 'object') {
    if (typeof v.$b64 === 'string') return Buffer.from(v.$b64, 'base64');
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
  }
  return v;
};
const encode = (v) => {
  if (Buffer.isBuffer(v)) return { $b64: v.toString('base64') };
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) return v.map(encode);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encode(x)]));
  return v;
};
const plainRows = (rows) => rows.map((r) => ({ ...r }));

async function runConsume(conn, req) {
  const failIds = new Set(req.fail_ids || []);
  const poisonIds = new Set(req.poison_ids || []);
  const maxAttempts = req.max_attempts || 5;
  const handled = [];
  const finished = new Set();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), req.timeout_ms || 20000);
  let timedOut = true;
  const handle = async (msg) => {
    handled.push({ ...msg });
    if (poisonIds.has(msg.id)) {
      finished.add(msg.id);
      throw new PoisonMessage(req.error);
    }
    if (failIds.has(msg.id)) {
      if (msg.attempt >= maxAttempts) finished.add(msg.id);
      throw new Error(req.error);
    }
    finished.add(msg.id);
  };
  const watch = setInterval(() => {
    if (finished.size >= req.expect) {
      timedOut = false;
      controller.abort();
    }
  }, 5);
  try {
    await consume(conn, {
      group: req.group,
      topic: req.topic,
      handle,
      signal: controller.signal,
      me: req.subscriber,
      maxAttempts,
      backoffMs: () => 0,
      idleMs: 20,
      prepared,
    });
  } finally {
    clearTimeout(timer);
    clearInterval(watch);
  }
  return { handled, timed_out: timedOut && finished.size < req.expect };
}

async function answer(conn, req) {
  switch (req.op) {
    case 'call':
      return plainRows(await call(conn, req.proc, decode(req.args), { prepared }));
    case 'query': {
      const args = decode(req.args || []);
      const [rows] = prepared ? await conn.execute(req.sql, args) : await conn.query(req.sql, args);
      return plainRows(rows);
    }
    case 'publish':
      return { ...(await publish(conn, req.topic, decode(req.payload), {
        key: req.key, id: req.id, metadata: req.metadata, prepared,
      })) };
    case 'publish_batch':
      return plainRows(await publishBatch(conn, req.topic, decode(req.messages), { prepared }));
    case 'consume':
      return runConsume(conn, req);
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

async function main() {
  const conn = await connect(uri);
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let reply;
    try {
      reply = { ok: encode(await answer(conn, JSON.parse(line))) };
    } catch (err) {
      if (err.errno === undefined && !err.sqlMessage) throw err; // a bug here, not a server error
      reply = {
        error: { errno: err.errno, sqlstate: err.sqlState, message: err.sqlMessage || err.message, code: mysqlqCode(err) },
      };
    }
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  }
  await conn.end();
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
