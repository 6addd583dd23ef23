// The agent's memory with N idle clients of each kind: Socket.IO over WebSocket, Socket.IO over
// long-polling, and plain /ws, one kind at a time on a fresh agent (sim backend, --no-history).
// VmRSS before, with the clients connected and greeted, per client. Clients come from 127.0.0.1-16. Needs web/node_modules (npm ci).
//   node bench/socketio_idle.mjs BINARY [N]      (N = 500 by default; the client cap is 1024)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'web');
const require = createRequire(join(webDir, 'package.json'));
const { io } = require('socket.io-client');
const WebSocket = require('ws');
const binary = resolve(process.argv[2] ?? 'build/gpufleet');
const N = Number(process.argv[3] ?? 500);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}

async function agent() {
  const dir = mkdtempSync(join(tmpdir(), 'gf-sio-bench-'));
  const portFile = join(dir, 'port');
  const p = spawn(binary, ['--backend', 'sim', 'serve', '--listen', '127.0.0.1:0', '--db', join(dir, 'db'), '--token-file', join(dir, 'token'),
    '--port-file', portFile, '--no-history'], { stdio: 'ignore', env: { ...process.env, GPUFLEET_SOCKET: 'none' } });
  for (let i = 0; i < 200 && !(existsSync(portFile) && readFileSync(portFile, 'utf8').trim()); i++) await sleep(50);
  return { p, dir, base: `http://127.0.0.1:${readFileSync(portFile, 'utf8').trim()}` };
}

async function run(kind) {
  const a = await agent();
  await fetch(`${a.base}/api/health`);
  await sleep(500);
  const before = rssMiB(a.p.pid);
  const clients = [];
  const greeted = [];
  // Node's polling transport cannot pick its source address: all from 127.0.0.1, under its 64-session cap.
  const n = kind === 'socket.io polling' ? Math.min(N, 60) : N;
  for (let i = 0; i < n; i++) {
    // From 127.0.0.1-16, under the per-address caps (256 connections, 64 Socket.IO sessions).
    const localAddress = `127.0.0.${1 + (i % 16)}`;
    if (kind === '/ws') {
      const ws = new WebSocket(`${a.base.replace('http', 'ws')}/ws`, { localAddress });
      greeted.push(new Promise((r) => ws.once('message', r)));
      clients.push({ close: () => ws.close() });
    } else {
      const s = io(a.base, { transports: [kind === 'socket.io websocket' ? 'websocket' : 'polling'], reconnection: false, forceNew: true, localAddress });
      greeted.push(new Promise((r) => s.once('gpu_status', r)));
      clients.push(s);
    }
  }
  await Promise.all(greeted);
  await sleep(2000);
  const during = rssMiB(a.p.pid);
  for (const c of clients) c.close();
  a.p.kill('SIGTERM');
  await new Promise((r) => a.p.once('exit', r));
  rmSync(a.dir, { recursive: true, force: true });
  console.log(`| ${kind} | ${n} | ${before.toFixed(1)} MiB | ${during.toFixed(1)} MiB | ${(((during - before) * 1024) / n).toFixed(1)} KiB |`);
}

console.log('| clients | N | RSS before | with N connected | per client |');
console.log('|---|---|---|---|---|');
for (const kind of (process.env.KINDS ?? '/ws,socket.io websocket,socket.io polling').split(',')) await run(kind);
process.exit(0);
