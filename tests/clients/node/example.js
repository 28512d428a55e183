'use strict';
// docs/clients.md's Node.js example: node example.js mysql://user:password@host:3306/db
// (tests/clients/test_docs.py runs it)
const { connect, publish, publishBatch, consume, PoisonMessage, mysqlqCode } = require('./mysqlq');

async function main(uri) {
  const conn = await connect(uri);

  const r = await publish(conn, 'orders', '{"total": 99}', {
    key: 'customer-42', // messages of one key are delivered in order
    id: 'order-1001', // publishing the same id again returns the first offset
    metadata: { source: 'web' },
  });
  console.log('published', r.partition_id, r.offset, r.duplicate, r.id);
  await publishBatch(conn, 'orders', [
    { key: 'customer-7', id: 'order-1002', payload: 'text is stored as UTF-8: Grüße 😀' },
    { id: 'order-1003', payload: Buffer.from([0x00, 0xff]) }, // no key: spread over the topic
  ]);

  try {
    await publish(conn, 'not a topic!', 'x');
  } catch (err) {
    console.log('refused', mysqlqCode(err)); // MQ001: match the code, not the words
  }

  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  let done = 0;
  await consume(conn, {
    group: 'billing',
    topic: 'orders',
    signal: stop.signal,
    handle: async (msg) => {
      if (msg.payload.length === 0) throw new PoisonMessage('empty payload');
      console.log('handled', msg.partition_key, msg.id, msg.attempt, msg.payload.toString('hex'));
      if (++done === 3) stop.abort(); // this example stops after three messages
    },
  });
  await conn.end();
}

main(process.argv[2]).catch((err) => {
  console.error(err);
  process.exit(1);
});
