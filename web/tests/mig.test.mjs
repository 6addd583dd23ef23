#!/usr/bin/env node
// Browser test of the dashboard's MIG view against the real agent on the fake NVML: `gpufleet serve
// --backend nvml` with tests/fixtures/nvml/mig.json (an A100 cut into four MIG instances, one GPU without
// MIG, one in MIG mode with none), in Debian's Chromium. On node:test (harness.mjs).
//
//   GF_BINARY=build/gpufleet GF_FAKE_NVML=build/tests/libnvidia-ml-fake.so node web/tests/mig.test.mjs
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { assert, check, SetupError, sleep, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(webDir, '..');
const dist = join(webDir, 'dist');
const binary = resolve(process.env.GF_BINARY ?? join(repo, 'build/gpufleet'));
const fakeNvml = resolve(process.env.GF_FAKE_NVML ?? join(repo, 'build/tests/libnvidia-ml-fake.so'));
const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

let agent = null;
let browser = null;
const tmp = mkdtempSync(join(tmpdir(), 'gf-web-mig-'));
let log = '';

async function cleanup() {
  if (browser) await Promise.race([browser.close().catch(() => {}), sleep(5000)]);
  browser = null;
  if (agent && agent.exitCode === null && agent.signalCode === null) {
    const gone = new Promise((r) => agent.once('exit', r));
    agent.kill('SIGTERM');
    if (!(await Promise.race([gone.then(() => true), sleep(5000).then(() => false)]))) agent.kill('SIGKILL');
  }
  rmSync(tmp, { recursive: true, force: true });
}

async function main() {
  for (const [what, path] of [['dashboard build', join(dist, 'index.html')], ['browser', chromiumPath], ['gpufleet', binary], ['fake NVML', fakeNvml]])
    if (!existsSync(path)) throw new SetupError(`no ${what} at ${path}`);
  const { chromium } = createRequire(join(webDir, 'package.json'))('playwright-core');
  const portFile = join(tmp, 'port');
  agent = spawn(binary, ['--backend', 'nvml', 'serve', '--listen', '127.0.0.1:0', '--interval', '0.5', '--static', dist,
    '--port-file', portFile, '--db', join(tmp, 'db')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1', GPUFLEET_NVML_LIBRARY: fakeNvml, FAKE_NVML_SCENARIO: join(repo, 'tests/fixtures/nvml/mig.json') },
  });
  agent.stdout.on('data', (d) => (log = (log + d).slice(-4000)));
  agent.stderr.on('data', (d) => (log = (log + d).slice(-4000)));
  const port = await until('the agent to write its port', () => {
    if (agent.exitCode !== null) throw new SetupError(`the agent exited:\n${log}`);
    return existsSync(portFile) ? /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'))?.[1] ?? null : null;
  }, 20_000);
  const base = `http://127.0.0.1:${port}`;

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: FLAGS });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(base + '/', { waitUntil: 'load' });

  await check('GPU 0 lists its four MIG instances with profile, ids, memory and full UUID', async () => {
    const rows = page.locator('.gpu-card[data-gpu-index="0"] .mig tr');
    await until('MIG rows', async () => (await rows.count()) === 4);
    const first = await rows.nth(0).innerText();
    assert(first.includes('3g.40gb'), `row 0: ${first}`);
    assert(first.includes('GI 2 · CI 0'), `row 0: ${first}`);
    assert(/14,?013 \/ 40,?192 MiB/.test(first), `row 0 memory: ${first}`);
    assert(first.includes('MIG-feb88891-0321-5fef-9c87-d4af3b54259e'), `row 0 uuid: ${first}`);
    const last = await rows.nth(3).getAttribute('data-mig-uuid');
    assert(last === 'MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6', `row 3: ${last}`);
  });

  await check('a GPU without MIG (or with no instance) shows no MIG section', async () => {
    assert((await page.locator('.gpu-card[data-gpu-index="1"] .mig').count()) === 0, 'GPU 1 has a MIG section');
    assert((await page.locator('.gpu-card[data-gpu-index="2"] .mig').count()) === 0, 'GPU 2 has a MIG section');
  });

  await check('GPU 0 utilization is n/a under MIG, its memory the whole GPU\'s', async () => {
    const util = await page.locator('.gpu-card[data-gpu-index="0"] .value.util').textContent();
    assert(util === 'n/a', `utilization reads "${util}"`);
    const mem = await page.locator('.gpu-card[data-gpu-index="0"] .value.mem').textContent();
    assert(/16,?100 MiB \/ 81,?920 MiB/.test(mem ?? ''), `memory reads "${mem}"`);
  });

  await check('the processes table names the instance a process runs in', async () => {
    const row = page.locator('tr[data-pid="5002"]');
    await until('process 5002', async () => (await row.count()) === 1);
    const text = await row.innerText();
    assert(text.includes('1g.10gb'), `row: ${text}`);
  });

  await check('no page errors', async () => assert(errors.length === 0, errors.join('; ')));
}

suite('MIG', { timeoutMs: 90_000, cleanup }, main);
