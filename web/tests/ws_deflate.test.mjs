// permessage-deflate on the live WebSocket (/ws and Socket.IO over WebSocket), through npm's `ws` (what
// socket.io-client runs on in node; browsers offer the same extension) against `gpufleet serve --backend
// sim`: a client that negotiates it decodes every message and receives far fewer bytes than one that does
// not (which still gets plain frames); its own compressed messages are read; pings answered during the
// fan-out; the closing handshake; a bad frame closed with 1002; and Chromium (when installed) negotiating
// it on /ws as the dashboard's page does.
//   GF_BINARY=build/gpufleet node web/tests/ws_deflate.test.mjs
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { assert, check, SetupError, sleep, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const binary = resolve(process.env.GF_BINARY ?? join(webDir, '..', 'build', 'gpufleet'));
let agent = null;
const sockets = [];

async function startAgent() {
  const tmp = mkdtempSync(join(tmpdir(), 'gf-deflate-test-'));
  const portFile = join(tmp, 'port');
  const args = ['--backend', 'sim', '--sim-gpus', '8', 'serve', '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--db', join(tmp, 'db'), '--socket', 'none', '--interval', '0.2'];
  const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  agent = { proc, tmp, log: '' };
  const keep = (d) => (agent.log = (agent.log + d).slice(-8000));
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const port = await until('the agent to write its port', () => {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new SetupError(`the agent exited:\n${agent.log}`);
    if (!existsSync(portFile)) return null;
    const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
    return m && Number(m[1]) > 0 ? m[1] : null;
  }, 20_000);
  agent.port = port;
}

async function cleanup() {
  for (const s of sockets) s.terminate?.() ?? s.close?.();
  if (!agent) return;
  if (agent.proc.exitCode === null && agent.proc.signalCode === null) {
    agent.proc.kill('SIGTERM');
    await until('the agent to stop', () => agent.proc.exitCode !== null || agent.proc.signalCode !== null, 10_000)
      .catch(() => agent.proc.kill('SIGKILL'));
  }
  rmSync(agent.tmp, { recursive: true, force: true });
}

/** A /ws client; resolves once open, recording every message (parsed) and the bytes its socket read. */
function openWs(WebSocket, perMessageDeflate, path = '/ws?period_ms=100') {
  return new Promise((res, rej) => {
    const ws = new WebSocket(`ws://127.0.0.1:${agent.port}${path}`, { perMessageDeflate });
    sockets.push(ws);
    ws.seen = [];
    ws.textBytes = 0;
    ws.on('message', (data, isBinary) => {
      assert(!isBinary, 'a binary message');
      const text = data.toString('utf8');
      ws.textBytes += Buffer.byteLength(text);
      ws.seen.push(JSON.parse(text));
    });
    ws.once('open', () => res(ws));
    ws.once('error', rej);
  });
}

const updates = (ws) => ws.seen.filter((m) => m.event === 'gpu_status_update');
const isUpdate = (m) => m && m.data && typeof m.data === 'object';

async function main() {
  if (!existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);
  const require = createRequire(join(webDir, 'package.json'));
  let WebSocket, io;
  try {
    WebSocket = require('ws');
    ({ io } = require('socket.io-client'));
  } catch {
    throw new SetupError('ws / socket.io-client are not installed: cd web && npm ci');
  }
  await startAgent();
  console.log(`# agent: ${binary} on port ${agent.port}`);

  await check('/ws: deflate negotiated, every message decodes, and the bytes shrink', async () => {
    // Every client message compressed too (threshold 0), so the agent's inflate is used.
    const z = await openWs(WebSocket, { threshold: 0 });
    const plain = await openWs(WebSocket, false);
    assert(/permessage-deflate/.test(z.extensions), `extensions: "${z.extensions}"`);
    assert(plain.extensions === '', `plain client got extensions "${plain.extensions}"`);
    await until('10 updates on both', () => updates(z).length >= 10 && updates(plain).length >= 10, 15_000);
    assert(z.seen[0].event === 'gpu_status', `first message: ${z.seen[0].event}`);
    assert(updates(z).every(isUpdate), 'an update without data');
    const zr = z._socket.bytesRead, pr = plain._socket.bytesRead;
    assert(zr * 2 < z.textBytes, `deflate: ${zr} bytes read for ${z.textBytes} bytes of messages`);
    assert(pr >= plain.textBytes, `plain: ${pr} bytes read for ${plain.textBytes} bytes of messages`);
    // A compressed request, then its reply.
    z.send(JSON.stringify({ event: 'set_period', data: { period_ms: 300 } }));
    await until('the period reply', () => z.seen.find((m) => m.event === 'period'), 5_000);
    assert(z.seen.find((m) => m.event === 'period').data.period_ms === 300, 'period not 300');
    z.send('not json at all');
    await until('the error reply', () => z.seen.find((m) => m.event === 'error'), 5_000);
  });

  await check('/ws deflate: pings are answered during the fan-out and the updates stay whole', async () => {
    const z = await openWs(WebSocket, true);
    let pongs = 0;
    z.on('pong', (p) => (pongs += p.toString() === 'probe' ? 1 : 0));
    const before = updates(z).length;
    for (let i = 0; i < 40; ++i) {
      z.ping('probe');
      await sleep(25);
    }
    await until('40 pongs', () => pongs === 40, 5_000);
    await until('more updates', () => updates(z).length >= before + 5, 5_000);
    assert(updates(z).every(isUpdate), 'an update did not decode');
  });

  await check('/ws deflate: a burst of requests (more than the agent reads ahead) gets every reply', async () => {
    const z = await openWs(WebSocket, { threshold: 0 }, '/ws?period_ms=5000');
    await until('the greeting', () => z.seen.length > 0, 5_000);
    for (let i = 0; i < 20; ++i) z.send(JSON.stringify({ event: 'set_period', data: { period_ms: 1000 + 100 * i } }));
    await until('20 period replies', () => z.seen.filter((m) => m.event === 'period').length === 20, 5_000);
    const periods = z.seen.filter((m) => m.event === 'period').map((m) => m.data.period_ms);
    assert(periods.every((p, i) => p === 1000 + 100 * i), `replies out of order: ${periods.join(' ')}`);
  });

  await check('/ws deflate: the closing handshake', async () => {
    const z = await openWs(WebSocket, true);
    await until('an update', () => updates(z).length > 0, 5_000);
    const code = await new Promise((res) => {
      z.once('close', (c) => res(c));
      z.close(1000, 'bye');
    });
    assert(code === 1000, `close code ${code}`);
  });

  await check('/ws deflate: an unmasked frame is closed with 1002', async () => {
    const code = await new Promise((res, rej) => {
      const s = net.connect(Number(agent.port), '127.0.0.1');
      sockets.push(s);
      let buf = Buffer.alloc(0);
      let upgraded = false;
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        if (!upgraded) {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const head = buf.subarray(0, end).toString();
          const ext = /permessage-deflate; server_no_context_takeover; client_no_context_takeover\r?$/im;
          if (!/^HTTP\/1\.1 101/.test(head) || !ext.test(head)) return rej(new Error(head));
          upgraded = true;
          buf = buf.subarray(end + 4);
          s.write(Buffer.from([0x81, 0x02, 0x68, 0x69])); // "hi", not masked
        }
        // Frames from the agent: skip to its close frame (opcode 8) and read its code.
        for (let at = 0; at + 2 <= buf.length; ) {
          const len7 = buf[at + 1] & 0x7f;
          const hdr = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
          const len = len7 === 126 ? buf.readUInt16BE(at + 2) : len7 === 127 ? Number(buf.readBigUInt64BE(at + 2)) : len7;
          if (at + hdr + len > buf.length) break;
          if ((buf[at] & 0x0f) === 8) return res(buf.readUInt16BE(at + hdr));
          at += hdr + len;
        }
      });
      s.once('error', rej);
      s.write(`GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n` +
        `Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n`);
    });
    assert(code === 1002, `close code ${code}`);
  });

  const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
  if (existsSync(chromiumPath)) {
    await check('Chromium offers permessage-deflate on /ws, gets it, and decodes the updates', async () => {
      const { chromium } = require('playwright-core');
      const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
      let got;
      try {
        const page = await browser.newPage();
        await page.goto(`http://127.0.0.1:${agent.port}/api/v1/health`); // the agent's own origin
        got = await page.evaluate(() => new Promise((res, rej) => {
          const ws = new WebSocket(`ws://${location.host}/ws?period_ms=100`);
          const events = [];
          ws.onmessage = (m) => {
            events.push(JSON.parse(m.data).event);
            if (events.length === 4) res({ extensions: ws.extensions, events });
          };
          ws.onerror = () => rej(new Error('WebSocket error'));
          setTimeout(() => rej(new Error(`only ${events.length} messages`)), 10_000);
        }));
      } finally {
        await browser.close();
      }
      assert(/permessage-deflate/.test(got.extensions), `extensions: "${got.extensions}"`);
      assert(got.events[0] === 'gpu_status' && got.events.slice(1).every((e) => e === 'gpu_status_update'),
        `events: ${got.events.join(' ')}`);
    });
  } else {
    console.log(`# no browser at ${chromiumPath}: the Chromium check is left out`);
  }

  await check('Socket.IO over WebSocket: deflate negotiated and the updates decode', async () => {
    const s = io(`http://127.0.0.1:${agent.port}`, {
      transports: ['websocket'], reconnection: false, forceNew: true, query: { period_ms: 100 },
      perMessageDeflate: { threshold: 0 },
    });
    sockets.push(s);
    const seen = [];
    s.onAny((event, data) => seen.push({ event, data }));
    await until('connect', () => s.connected, 10_000);
    const ws = s.io.engine.transport.ws;
    assert(/permessage-deflate/.test(ws.extensions), `extensions: "${ws.extensions}"`);
    await until('5 updates', () => seen.filter((e) => e.event === 'gpu_status_update').length >= 5, 10_000);
    assert(seen.filter((e) => e.event === 'gpu_status_update').every((e) => e.data && typeof e.data === 'object'),
      'an update did not decode');
    s.close();
  });
}

suite('permessage-deflate', { timeoutMs: 90_000, cleanup, onFailure: () => agent && console.log(`# agent output:\n${agent.log}`) }, main);
