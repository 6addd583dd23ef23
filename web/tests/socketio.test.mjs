// The seed's React frontend talks Socket.IO: this runs the real socket.io-client from npm against
// `gpufleet serve --backend sim` over long-polling, WebSocket, and polling-then-upgrade, and checks the
// seed's events, the token rule and the Origin check. Plain node, no browser.
//   GF_BINARY=build/gpufleet node web/tests/socketio.test.mjs
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { assert, check, SetupError, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const binary = resolve(process.env.GF_BINARY ?? join(webDir, '..', 'build', 'gpufleet'));
const TOKEN = 'sio-test-token-0123456789abcdef';
const agents = [];
const sockets = []; // every Socket.IO client opened, closed by cleanup()
// The Docker stand-in (tests/fakes/standin_main.cpp) for the job events; ctest sets GF_STANDIN.
const standinBinary = process.env.GF_STANDIN ? resolve(process.env.GF_STANDIN) : null;
let engine = null;

/** `standin docker`: resolves to its socket path; its containers run 300 ms and exit 0. */
async function startEngine() {
  engine = spawn(standinBinary, ['docker', '--run-time-ms', '300'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let out = '';
  engine.stdout.on('data', (d) => (out += d));
  return until('the Docker stand-in', () => (out.includes('\n') ? out.split('\n')[0].trim() : null), 10_000);
}

async function startAgent({ authRead = false, dockerSocket = null } = {}) {
  const tmp = mkdtempSync(join(tmpdir(), 'gf-sio-test-'));
  const portFile = join(tmp, 'port');
  const config = join(tmp, 'agent.json');
  // The alert rule fires soon (the sim backend has a GPU above 50 %), so a connected client sees it.
  writeFileSync(
    config,
    JSON.stringify({
      alerts: { high_gpu_usage: { duration_s: 3 } }, auth_read: authRead, allowed_origins: ['http://dash.example'],
      ...(dockerSocket ? { jobs: { submit: true } } : {}),
    }),
  );
  const args = ['serve', '--backend', 'sim', '--listen', '127.0.0.1:0', '--port-file', portFile, '--db', join(tmp, 'db'), '--config', config];
  const env = { ...process.env, NO_COLOR: '1', GPUFLEET_TOKEN: TOKEN, GPUFLEET_SOCKET: 'none',
    ...(dockerSocket ? { DOCKER_HOST: `unix://${dockerSocket}` } : {}) };
  const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const a = { proc, tmp, log: '' };
  agents.push(a);
  const keep = (d) => {
    a.log = (a.log + d).slice(-8000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const port = await until(
    'the agent to write its port',
    () => {
      if (proc.exitCode !== null || proc.signalCode !== null)
        throw new SetupError(`the agent exited (${proc.exitCode ?? proc.signalCode}):\n${a.log}`);
      if (!existsSync(portFile)) return null;
      const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
      return m && Number(m[1]) > 0 ? m[1] : null;
    },
    20_000,
  ).catch((e) => {
    throw e instanceof SetupError ? e : new SetupError(`${e.message}\nagent output:\n${a.log}`);
  });
  a.base = `http://127.0.0.1:${port}`;
  return a;
}

async function cleanup() {
  for (const s of sockets) s.close();
  if (engine && engine.exitCode === null) engine.stdin.end();
  for (const a of agents) {
    if (a.proc.exitCode === null && a.proc.signalCode === null) {
      a.proc.kill('SIGTERM');
      await until('the agent to stop', () => a.proc.exitCode !== null || a.proc.signalCode !== null, 10_000).catch(() => a.proc.kill('SIGKILL'));
    }
    rmSync(a.tmp, { recursive: true, force: true });
  }
}

/** Records every event a socket gets, so checks can wait for one. */
function record(socket) {
  const seen = [];
  socket.onAny((event, ...args) => seen.push({ event, args }));
  return seen;
}

const waitFor = (seen, event, ms = 10_000) =>
  until(`the ${event} event`, () => seen.find((e) => e.event === event), ms).then((e) => e.args[0]);

function connected(socket, ms = 10_000) {
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('no connect within ' + ms + ' ms')), ms);
    socket.once('connect', () => {
      clearTimeout(t);
      res();
    });
    socket.once('connect_error', (e) => {
      clearTimeout(t);
      rej(new Error(`connect_error: ${e.message}`));
    });
  });
}

function refused(socket, ms = 10_000) {
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('neither connect nor connect_error within ' + ms + ' ms')), ms);
    socket.once('connect', () => {
      clearTimeout(t);
      rej(new Error('connected, but should have been refused'));
    });
    socket.once('connect_error', (e) => {
      clearTimeout(t);
      res(e);
    });
  });
}

const isStatus = (d) => d && typeof d === 'object' && Array.isArray(d.gpus) && d.gpus.length > 0 && 'timestamp' in d;

async function main() {
  if (!existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);
  const require = createRequire(join(webDir, 'package.json'));
  let io;
  try {
    ({ io } = require('socket.io-client'));
  } catch {
    throw new SetupError('socket.io-client is not installed: cd web && npm ci');
  }
  if (!standinBinary || !existsSync(standinBinary)) throw new SetupError('no Docker stand-in (set GF_STANDIN to build/tests/standin)');
  const agent = await startAgent({ dockerSocket: await startEngine() });
  console.log(`# agent: ${binary} at ${agent.base}`);
  const opts = (extra) => ({ reconnection: false, timeout: 10_000, forceNew: true, ...extra });
  const open = (url, extra) => {
    const s = io(url, opts(extra));
    sockets.push(s);
    return s;
  };

  // --- the three ways in ---------------------------------------------------------------------------
  for (const [name, extra, finalTransport] of [
    ['polling only', { transports: ['polling'] }, 'polling'],
    ['websocket only', { transports: ['websocket'] }, 'websocket'],
    ['default (polling, then the upgrade)', {}, 'websocket'],
  ]) {
    const s = open(agent.base, extra);
    const seen = record(s);
    s.__seen = seen;
    await check(`${name}: connects and gets gpu_status and system:initial_status`, async () => {
      await connected(s);
      const status = await waitFor(seen, 'gpu_status');
      assert(isStatus(status), `gpu_status payload: ${JSON.stringify(status).slice(0, 200)}`);
      const initial = await waitFor(seen, 'system:initial_status');
      assert(JSON.stringify(initial) === JSON.stringify(status), 'system:initial_status differs from gpu_status');
    });
    await check(`${name}: ends on the ${finalTransport} transport`, async () => {
      await until(`transport ${finalTransport}`, () => s.io.engine?.transport?.name === finalTransport, 10_000);
    });
    await check(`${name}: request_gpu_update is answered (event and ack)`, async () => {
      const before = seen.filter((e) => e.event === 'gpu_status_update').length;
      const acked = await s.timeout(10_000).emitWithAck('request_gpu_update');
      assert(isStatus(acked), `ack payload: ${JSON.stringify(acked).slice(0, 200)}`);
      await until('a gpu_status_update after the request', () => seen.filter((e) => e.event === 'gpu_status_update').length > before);
    });
    await check(`${name}: request_monitoring_stats answers system:metrics_update`, async () => {
      const before = seen.filter((e) => e.event === 'system:metrics_update').length;
      s.emit('request_monitoring_stats');
      await until('system:metrics_update', () => seen.filter((e) => e.event === 'system:metrics_update').length > before);
      assert(isStatus(seen.findLast((e) => e.event === 'system:metrics_update').args[0]), 'system:metrics_update payload');
    });
    await check(`${name}: gpu_status_update arrives on its own within the 5 s period`, async () => {
      const n = () => seen.filter((e) => e.event === 'gpu_status_update').length;
      const before = n();
      await until('a periodic gpu_status_update', () => n() > before, 12_000);
      assert(isStatus(seen.findLast((e) => e.event === 'gpu_status_update').args[0]), 'update payload');
    });
  }

  await check('high_gpu_usage_alert from the alert rule reaches every transport', async () => {
    const alerts = (s) => s.__seen.filter((e) => e.event === 'high_gpu_usage_alert').map((e) => e.args[0]);
    await until('the alert on all three clients', () => sockets.slice(0, 3).every((s) => alerts(s).length > 0), 30_000);
    const a = alerts(sockets[0])[0];
    assert(a && typeof a === 'object' && 'state' in a, `alert payload: ${JSON.stringify(a)}`);
  });

  await check('a submitted job\'s life (job_queued, job_started, job_finished) reaches every transport', async () => {
    const r = await fetch(`${agent.base}/api/v1/jobs`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'busybox', args: ['true'], min_memory_mb: 0, wait_s: 10 }),
    });
    const text = await r.text();
    assert(r.status === 202, `POST /api/v1/jobs: ${r.status} ${text}`);
    const { id } = JSON.parse(text);
    const of = (s, event) => s.__seen.find((e) => e.event === event && e.args[0]?.id === id)?.args[0];
    await until('job_finished on all three clients', () => sockets.slice(0, 3).every((s) => of(s, 'job_finished')), 30_000);
    for (const s of sockets.slice(0, 3)) {
      assert(of(s, 'job_queued') && Array.isArray(of(s, 'job_started')?.gpus), 'job_queued / job_started missing');
      assert(of(s, 'job_finished').exit_code === 0, `job_finished: ${JSON.stringify(of(s, 'job_finished'))}`);
    }
  });

  await check('another namespace is refused with connect_error', async () => {
    const e = await refused(open(`${agent.base}/admin`, { transports: ['websocket'] }));
    assert(/namespace/i.test(e.message), e.message);
  });
  const shared = { require, agent, open };
  await handshakeChecks(shared);
  await boundChecks(shared);
}

/** Namespaces, Origins, the handshake and the raw polling session. */
async function handshakeChecks({ agent, open }) {
  await check('a foreign Origin is refused (WebSocket and polling)', async () => {
    const headers = { Origin: 'http://evil.example' };
    await refused(open(agent.base, { transports: ['websocket'], extraHeaders: headers }));
    const r = await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`, { headers });
    assert(r.status === 403, `polling handshake from a foreign Origin: ${r.status}`);
    assert(!r.headers.get('access-control-allow-origin'), 'a CORS header for a foreign Origin');
  });

  await check('an allowed Origin gets CORS headers for itself (and a preflight answer)', async () => {
    const headers = { Origin: 'http://dash.example' };
    const r = await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`, { headers });
    assert(r.status === 200 && (await r.text()).startsWith('0{'), `handshake: ${r.status}`);
    assert(r.headers.get('access-control-allow-origin') === 'http://dash.example', 'no Access-Control-Allow-Origin');
    const pre = await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`, {
      method: 'OPTIONS',
      headers: { ...headers, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization' },
    });
    assert(pre.status === 204, `preflight: ${pre.status}`);
    assert(/POST/.test(pre.headers.get('access-control-allow-methods') ?? ''), 'preflight methods');
    const s = open(agent.base, { transports: ['websocket'], extraHeaders: headers });
    await connected(s);
  });

  await check('the handshake refuses Engine.IO 3 and an unknown sid', async () => {
    const r3 = await fetch(`${agent.base}/socket.io/?EIO=3&transport=polling`);
    assert(r3.status === 400, `EIO=3: ${r3.status}`);
    const rs = await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling&sid=nosuchsession`);
    assert(rs.status === 400, `unknown sid: ${rs.status}`);
  });

  await check('a raw polling session: open packet, CONNECT, events; a second concurrent GET closes it', async () => {
    const h = await (await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`)).text();
    assert(h.startsWith('0{'), `open packet ${h}`);
    const o = JSON.parse(h.slice(1));
    assert(o.pingInterval === 25000 && o.pingTimeout === 20000 && o.maxPayload === 1000000, h);
    assert(JSON.stringify(o.upgrades) === '["websocket"]', h);
    const url = `${agent.base}/socket.io/?EIO=4&transport=polling&sid=${o.sid}`;
    const post = await fetch(url, { method: 'POST', body: '40' });
    assert(post.status === 200 && (await post.text()) === 'ok', 'POST 40');
    const body = await (await fetch(url)).text();
    const packets = body.split('\x1e');
    assert(/^40\{"sid":"[0-9a-f]+"\}$/.test(packets[0]), `first packet ${packets[0]}`);
    assert(packets.some((p) => p.startsWith('42["gpu_status",')), 'no gpu_status packet');
    // Two GETs at once: the protocol says the session ends. Whichever the agent sees second is
    // refused; the one waiting gets the close packet. (A session without CONNECT: nothing is queued
    // for it before the first ping, so the first GET waits.)
    const o2 = JSON.parse((await (await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`)).text()).slice(1));
    const url2 = `${agent.base}/socket.io/?EIO=4&transport=polling&sid=${o2.sid}`;
    const answers = await Promise.all([fetch(url2), fetch(url2)].map((p) => p.then(async (r) => `${r.status} ${await r.text()}`)));
    assert(answers.some((a) => a.startsWith('400 ')), `no GET refused: ${answers}`);
    assert(answers.includes('200 1'), `the pending GET did not get the close packet: ${answers}`);
    const after = await fetch(url2);
    assert(after.status === 400, `the closed session still answers: ${after.status}`);
  });

  await check('a binary or malformed packet ends the session', async () => {
    const o = JSON.parse((await (await fetch(`${agent.base}/socket.io/?EIO=4&transport=polling`)).text()).slice(1));
    const url = `${agent.base}/socket.io/?EIO=4&transport=polling&sid=${o.sid}`;
    const bad = await fetch(url, { method: 'POST', body: '45-["x",{"_placeholder":true,"num":0}]' });
    assert(bad.status === 200, `POST ${bad.status}`);
    const r = await fetch(url);
    assert(r.status === 400 || (await r.text()) === '1', 'the session survived a binary packet');
  });
}

/** The bounds an unauthenticated client cannot pass, and the token rule. */
async function boundChecks({ require, agent, open }) {
  // --- bounds an unauthenticated client cannot pass (security review 1, 2, 5) ----------------------
  const openSession = async (base = agent.base) => {
    const o = JSON.parse((await (await fetch(`${base}/socket.io/?EIO=4&transport=polling`)).text()).slice(1));
    return { sid: o.sid, url: `${base}/socket.io/?EIO=4&transport=polling&sid=${o.sid}` };
  };
  await check('before CONNECT a POST body is a few KiB at most (413), and the session ends', async () => {
    const { url } = await openSession();
    const big = await fetch(url, { method: 'POST', body: '2' + 'x'.repeat(8000) });
    assert(big.status === 413, `an 8 kB body before CONNECT: ${big.status}`);
    const after = await fetch(url);
    assert(after.status === 400 || (await after.text()) === '1', 'the session survived');
    const { url: ok } = await openSession();
    const small = await fetch(ok, { method: 'POST', body: '2' + 'x'.repeat(3000) });
    assert(small.status === 200, `a 3 kB body: ${small.status}`);
  });
  await check('a client ping is not echoed', async () => {
    const { url } = await openSession();
    await fetch(url, { method: 'POST', body: '2hello\x1e2again' });
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), 1500);
    const got = await fetch(url, { signal: ac.signal }).then((r) => r.text()).catch(() => 'nothing');
    clearTimeout(t);
    assert(got === 'nothing', `the GET got ${JSON.stringify(got)} (an echo?)`);
  });
  await check('an upgrade answers one 2probe; a second one closes the session', async () => {
    const WebSocket = require('ws');
    const { sid, url } = await openSession();
    await fetch(url, { method: 'POST', body: '40' });
    await (await fetch(url)).text();
    const ws = new WebSocket(`${agent.base.replace('http', 'ws')}/socket.io/?EIO=4&transport=websocket&sid=${sid}`);
    const got = [];
    let closed = false;
    ws.on('message', (m) => got.push(String(m)));
    ws.on('close', () => (closed = true));
    await new Promise((res, rej) => (ws.once('open', res), ws.once('error', rej)));
    for (let i = 0; i < 50; i++) ws.send('2probe');
    await until('the WebSocket to close', () => closed, 5000);
    assert(got.filter((m) => m === '3probe').length === 1, `answers: ${got.filter((m) => m === '3probe').length}`);
    const after = await fetch(url);
    assert(after.status === 400 || (await after.text()) === '1', 'the session survived the flood');
  });
  await check('all of 127.0.0.0/8 is one address for the session cap (64)', async () => {
    const http = require('node:http');
    const fromAddress = (localAddress) =>
      new Promise((res) => {
        const port = Number(new URL(agent.base).port);
        const req = http.get({ host: '127.0.0.1', port, localAddress, path: '/socket.io/?EIO=4&transport=polling' }, (r) => {
          r.resume();
          r.on('end', () => res(r.statusCode));
        });
        req.on('error', () => res(0));
      });
    const codes = [];
    for (let i = 0; i < 70; i++) codes.push(await fromAddress(`127.0.${i % 7}.${10 + i}`));
    const ok = codes.filter((c) => c === 200).length;
    assert(ok <= 64, `${ok} sessions from loopback addresses`);
    assert(codes.includes(503), `no refusal: ${codes.join(' ')}`);
  });

  // --- the token rule (auth_read) ---------------------------------------------------------------------
  const locked = await startAgent({ authRead: true });
  await check('auth_read: no token, or a wrong one, gets connect_error', async () => {
    await refused(open(locked.base, { transports: ['websocket'] }));
    await refused(open(locked.base, { transports: ['polling'], auth: { token: 'wrong' } }));
    await refused(open(locked.base, { transports: ['websocket'], extraHeaders: { Authorization: 'Bearer wrong' } }));
  });
  await check('auth_read: the token as CONNECT auth, header or ?token= connects', async () => {
    for (const extra of [
      { transports: ['polling'], auth: { token: TOKEN } },
      { transports: ['websocket'], extraHeaders: { Authorization: `Bearer ${TOKEN}` } },
      { query: { token: TOKEN } },
    ]) {
      const s = open(locked.base, extra);
      const seen = record(s);
      await connected(s);
      assert(isStatus(await waitFor(seen, 'gpu_status')), 'no gpu_status after an authorised connect');
    }
  });
}

const agentOutput = () => {
  for (const a of agents) if (a.log) console.log(`# agent output:\n${a.log}`);
};
suite('Socket.IO', { timeoutMs: 150_000, cleanup, onFailure: agentOutput }, main);
