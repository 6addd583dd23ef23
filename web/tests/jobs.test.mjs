#!/usr/bin/env node
// Browser test of job submission from the dashboard (issue 23, item 8): the real agent on two simulated
// GPUs with "jobs": {"submit": true}, its Docker engine the stand-in (`standin docker`, tests/fakes/standin_main.cpp).
// The page shows no form until it holds the agent's token; with it, a submitted job runs in the stand-in
// and reaches the jobs table as succeeded; a job that waits (both GPUs leased) is cancelled with its
// button and ends interrupted. On node:test (harness.mjs): a TAP report, non-zero exit on a failure.
//
//   GF_BINARY=build/gpufleet GF_STANDIN=build/tests/standin node web/tests/jobs.test.mjs
//   GF_CHROMIUM   browser binary (default /usr/bin/chromium)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { assert, check, SetupError, sleep, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(webDir, '..');
const dist = join(webDir, 'dist');
const binary = resolve(process.env.GF_BINARY ?? join(repo, 'build/gpufleet'));
const standinBinary = resolve(process.env.GF_STANDIN ?? join(repo, 'build/tests/standin'));
const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
const OVERALL_TIMEOUT_MS = 150_000;
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

let agent = null;
let standin = null;
let browser = null;
let tmp = null;
let log = '';

async function stop(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  if ((await Promise.race([gone.then(() => true), sleep(5000).then(() => false)])) === false) {
    child.kill('SIGKILL');
    await Promise.race([gone, sleep(2000)]);
  }
}

async function cleanup() {
  if (browser) {
    const b = browser;
    browser = null;
    await Promise.race([b.close().catch(() => {}), sleep(5000)]);
  }
  await stop(agent);
  agent = null;
  await stop(standin);
  standin = null;
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
}

function spawnLogged(cmd, args, env) {
  const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
  const keep = (d) => (log = (log + d).slice(-8000));
  p.stderr.on('data', keep);
  return p;
}

async function main() {
  if (!existsSync(join(dist, 'index.html'))) throw new SetupError(`${dist}/index.html is missing: make web first`);
  if (!existsSync(chromiumPath)) throw new SetupError(`no browser at ${chromiumPath} (set GF_CHROMIUM)`);
  if (!existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);
  if (!existsSync(standinBinary)) throw new SetupError(`no Docker stand-in at ${standinBinary} (set GF_STANDIN)`);
  const require = createRequire(join(webDir, 'package.json'));
  const { chromium } = require('playwright-core');
  tmp = mkdtempSync(join(tmpdir(), 'gf-jobs-test-'));

  // The engine: each container runs 1.5 s, then exits 0.
  standin = spawnLogged(standinBinary, ['docker', '--run-time-ms', '1500'], process.env);
  let out = '';
  standin.stdout.on('data', (d) => (out += d));
  const socket = await until('the stand-in socket path', () => (out.includes('\n') ? out.split('\n')[0].trim() : null), 10_000);

  const cfg = join(tmp, 'agent.json');
  writeFileSync(cfg, JSON.stringify({ jobs: { submit: true } }));
  const sim = join(tmp, 'sim.json');
  writeFileSync(sim, JSON.stringify({ gpus: [0, 1].map(() => ({ name: 'Sim H100', memory_total_mib: 81559, load: [{ t: 0, utilization: 0, memory_used_mib: 500 }] })) }));
  const portFile = join(tmp, 'port');
  agent = spawnLogged(binary, ['--backend', 'sim', 'serve', '--interval', '0.2', '--listen', '127.0.0.1:0', '--static', dist, '--port-file', portFile,
    '--db', join(tmp, 'db'), '--socket', 'none', '--config', cfg],
  { ...process.env, NO_COLOR: '1', DOCKER_HOST: `unix://${socket}`, GPUFLEET_SIM_SCENARIO: sim });
  agent.stdout.on('data', (d) => (log = (log + d).slice(-8000)));
  const port = await until('the agent to write its port', () => {
    if (agent.exitCode !== null) throw new SetupError(`the agent exited:\n${log}`);
    if (!existsSync(portFile)) return null;
    const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
    return m && Number(m[1]) > 0 ? m[1] : null;
  }, 20_000);
  const base = `http://127.0.0.1:${port}`;
  const token = readFileSync(join(tmp, 'agent.token'), 'utf8').trim();
  const api = async (method, path, body) => {
    const r = await fetch(base + path, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
    return { status: r.status, doc: await r.json().catch(() => null) };
  };

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
  const page = await browser.newPage({ viewport: { width: 1300, height: 1400 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && !/Failed to load resource/.test(m.text()) && pageErrors.push(`console: ${m.text()}`));
  await page.goto(`${base}/`, { waitUntil: 'load' });
  const form = page.locator('#submit-job form.job-form');

  await check('without the token there is no job form, only the token prompt', async () => {
    await page.locator('#submit-job input[name="token"]').waitFor({ timeout: 15_000 });
    assert((await form.count()) === 0, 'the job form is shown without a token');
  });

  await check('with the token, a submitted job runs in the engine and is recorded as succeeded', async () => {
    await page.locator('#submit-job input[name="token"]').fill(token);
    await page.locator('#submit-job form.token-form button').click();
    await form.waitFor({ timeout: 10_000 });
    await form.locator('input[name="image"]').fill('busybox:latest');
    await form.locator('input[name="args"]').fill('echo hello');
    await form.locator('input[name="min_memory_mb"]').fill('0');
    await form.locator('input[name="name"]').fill('from-the-page');
    await form.locator('button[type="submit"]').click();
    const msg = await until('the submission message', async () => {
      const t = await page.locator('#submit-job p.ok, #submit-job p.error').first().textContent().catch(() => null);
      return t && t.trim();
    });
    const id = /job (\S+) submitted/.exec(msg)?.[1];
    assert(id, `no job id in "${msg}"`);
    const row = page.locator('#jobs tbody tr', { hasText: id });
    await until(`job ${id} succeeded in the table`, async () => (await row.locator('.badge.job.succeeded').count()) === 1, 30_000);
    const { doc } = await api('GET', `/api/v1/jobs/${id}`);
    assert(doc.name === 'from-the-page' && doc.submitted_via === 'api', JSON.stringify(doc));
    assert(JSON.stringify(doc.command) === JSON.stringify(['echo', 'hello']), `command ${JSON.stringify(doc.command)}`);
    assert(doc.docker?.image === 'busybox:latest' && doc.docker?.container_id, JSON.stringify(doc.docker));
  });

  await check('a waiting job is cancelled with its button and ends interrupted', async () => {
    const held = await api('POST', '/api/v1/allocations', { gpus: 2, min_memory_mb: 0 });
    assert(held.status === 201, `allocation: ${held.status} ${JSON.stringify(held.doc)}`);
    await form.locator('input[name="image"]').fill('busybox:latest');
    await form.locator('input[name="args"]').fill('');
    await form.locator('input[name="name"]').fill('waits');
    await form.locator('input[name="wait_s"]').fill('120');
    await form.locator('button[type="submit"]').click();
    const button = page.locator('#submit-job .in-flight button.cancel-job');
    await button.first().waitFor({ timeout: 15_000 });
    const id = await button.first().getAttribute('data-job');
    await button.first().click();
    await until(`job ${id} interrupted`, async () => (await api('GET', `/api/v1/jobs/${id}`)).doc?.status === 'interrupted', 20_000);
    await until('the cancel button gone', async () => (await page.locator(`#submit-job button[data-job="${id}"]`).count()) === 0, 20_000);
    await api('DELETE', `/api/v1/allocations/${held.doc.id}`);
  });

  await check('no errors in the page', async () => {
    assert(pageErrors.length === 0, pageErrors.join(' | '));
  });
}

suite('jobs', { timeoutMs: OVERALL_TIMEOUT_MS, cleanup, onFailure: () => console.log(log) }, main);
