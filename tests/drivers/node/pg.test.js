// node-postgres (`pg`) against a real Freshet server: typed parameters
// and results (timestamptz, arrays, jsonb, uuid, numeric), named prepared
// statements, transactions, COPY both ways (pg-copy-streams), a pool, and
// errors with their SQLSTATEs. Run by scripts/test.sh with `node --test`;
// NODE_PATH points at the folder it installs `pg` into.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const { Client, Pool } = require('pg');
const { from: copyFrom, to: copyTo } = require('pg-copy-streams');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

async function waitForPort(port, proc, deadline) {
  for (;;) {
    if (proc.exitCode !== null) throw new Error('freshet exited during startup');
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.on('connect', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error('freshet did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
}

let server;
let config;

test.before(async () => {
  const bin = process.env.FRESHET_BIN;
  assert.ok(bin, 'FRESHET_BIN must name the freshet binary');
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'freshet-node-'));
  const port = await freePort();
  server = spawn(bin, [
    '--data-dir', data,
    '--listen', `127.0.0.1:${port}`,
    '--http-listen', `127.0.0.1:${await freePort()}`,
    '--log-filter', 'warn',
  ], { stdio: 'inherit' });
  await waitForPort(port, server, Date.now() + 60000);
  config = { host: '127.0.0.1', port, user: 'freshet', database: 'freshet' };
});

test.after(() => {
  if (server) server.kill('SIGTERM');
});

async function withClient(f) {
  const c = new Client(config);
  await c.connect();
  try {
    return await f(c);
  } finally {
    await c.end();
  }
}

test('typed parameters and results round-trip', () => withClient(async (c) => {
  await c.query(`CREATE TABLE np_types (id serial PRIMARY KEY, name text, at timestamptz,
    tags text[], ints int[], doc jsonb, u uuid, n numeric(10,2), d date, big bigint)`);
  const at = new Date('2024-01-02T03:04:05.678Z');
  const inserted = await c.query(
    `INSERT INTO np_types (name, at, tags, ints, doc, u, n, d, big)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
    ['a', at, ['x', 'y,z', null], [1, 2], { k: [1, 'two'] },
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '12.50', '2024-02-29', '9007199254740993'],
  );
  assert.equal(inserted.rows[0].id, 1);
  const { rows } = await c.query('SELECT * FROM np_types WHERE id = $1', [1]);
  const r = rows[0];
  assert.equal(r.name, 'a');
  assert.equal(r.at.getTime(), at.getTime());
  assert.deepEqual(r.tags, ['x', 'y,z', null]);
  assert.deepEqual(r.ints, [1, 2]);
  assert.deepEqual(r.doc, { k: [1, 'two'] });
  assert.equal(r.u, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
  assert.equal(r.n, '12.50');
  assert.equal(r.big, '9007199254740993');
  // A uuid parameter compared with a uuid column; an array parameter.
  const byUuid = await c.query('SELECT id FROM np_types WHERE u = $1',
    ['A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11']);
  assert.deepEqual(byUuid.rows, [{ id: 1 }]);
  const any = await c.query('SELECT id FROM np_types WHERE id = ANY($1)', [[3, 1]]);
  assert.deepEqual(any.rows, [{ id: 1 }]);
  const arr = await c.query({ text: 'SELECT id, name FROM np_types', rowMode: 'array' });
  assert.deepEqual(arr.rows, [[1, 'a']]);
}));

test('named prepared statements, transactions and errors', () => withClient(async (c) => {
  await c.query('CREATE TABLE np_tx (id int PRIMARY KEY, n int)');
  for (let i = 1; i <= 3; i++) {
    // Parsed once under its name, then bound and executed each time.
    await c.query({ name: 'np_ins', text: 'INSERT INTO np_tx VALUES ($1, $2)', values: [i, i * 10] });
  }
  await c.query('BEGIN');
  await c.query('UPDATE np_tx SET n = n + 1 WHERE id = $1', [1]);
  const inside = await c.query('SELECT n FROM np_tx WHERE id = 1');
  assert.equal(inside.rows[0].n, 11);
  await c.query('ROLLBACK');
  const after = await c.query({ name: 'np_get', text: 'SELECT n FROM np_tx WHERE id = $1', values: [1] });
  assert.equal(after.rows[0].n, 10);

  await assert.rejects(c.query('SELECT nosuch FROM np_tx'), { code: '42703' });
  await assert.rejects(c.query('SELECT * FROM nosuch'), { code: '42P01' });
  await assert.rejects(c.query('INSERT INTO np_tx VALUES (1, 0)'), { code: '23505' });
  await assert.rejects(c.query('SELECT 1 / 0'), { code: '22012' });
  await c.query('BEGIN');
  await assert.rejects(c.query('SELECT 1 / 0'), { code: '22012' });
  await assert.rejects(c.query('SELECT 1'), { code: '25P02' });
  await c.query('ROLLBACK');
  const count = await c.query('SELECT count(*)::int AS n FROM np_tx');
  assert.equal(count.rows[0].n, 3);
}));

test('COPY both ways and a pool', async () => {
  await withClient(async (c) => {
    await c.query('CREATE TABLE np_copy (id int, name text)');
    const rowCount = await new Promise((resolve, reject) => {
      const s = c.query(copyFrom("COPY np_copy FROM STDIN WITH (FORMAT csv)"));
      s.on('finish', () => resolve(s.rowCount));
      s.on('error', reject);
      for (let i = 0; i < 1000; i++) s.write(`${i},"name ${i}"\n`);
      s.end();
    });
    assert.equal(rowCount, 1000);
    const out = await new Promise((resolve, reject) => {
      const s = c.query(copyTo('COPY (SELECT * FROM np_copy WHERE id < 3 ORDER BY id) TO STDOUT'));
      let text = '';
      s.on('data', (d) => { text += d; });
      s.on('end', () => resolve(text));
      s.on('error', reject);
    });
    assert.equal(out, '0\tname 0\n1\tname 1\n2\tname 2\n');
  });
  const pool = new Pool({ ...config, max: 3 });
  try {
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => pool.query('SELECT count(*)::int + $1 AS n FROM np_copy', [i])),
    );
    assert.deepEqual(results.map((r) => r.rows[0].n), Array.from({ length: 12 }, (_, i) => 1000 + i));
  } finally {
    await pool.end();
  }
});
