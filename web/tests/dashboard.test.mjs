#!/usr/bin/env node
// Browser test of the dashboard against the real agent: starts `gpufleet serve` on the sim backend with
// web/dist as its static root, opens the page in Debian's Chromium (playwright-core, never a downloaded
// browser) and checks what the page shows. On node:test (harness.mjs): a TAP report, non-zero exit on any
// failure. The agent and the browser are always stopped.
//
//   GF_BINARY=build/gpufleet node web/tests/dashboard.test.mjs
//   GF_CHROMIUM   browser binary (default /usr/bin/chromium)
//   --mock        run web/dev/mock-server.mjs instead of `gpufleet serve` (UI work without the agent)
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
const useMock = process.argv.includes('--mock');
const binary = resolve(process.env.GF_BINARY ?? join(repo, 'build/gpufleet'));
const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
const OVERALL_TIMEOUT_MS = 120_000;
// GPU 0 of the default scenario runs at ~90 %: with this rule it fires a few seconds after the agent
// starts, i.e. after the page has loaded, so the alert reaches the page over the WebSocket.
const ALERT_AFTER_S = 6;
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

let agent = null;
let browser = null;
let tmp = null;
let agentLog = '';
let agentStartedAt = 0;

async function cleanup() {
  if (browser) {
    const b = browser;
    browser = null;
    await Promise.race([b.close().catch(() => {}), sleep(5000)]);
  }
  if (agent && agent.exitCode === null && agent.signalCode === null) {
    const a = agent;
    const gone = new Promise((r) => a.once('exit', r));
    a.kill('SIGTERM');
    if ((await Promise.race([gone.then(() => true), sleep(5000).then(() => false)])) === false) {
      a.kill('SIGKILL');
      await Promise.race([gone, sleep(2000)]);
    }
  }
  agent = null;
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
}

// --- the agent -------------------------------------------------------------------------------------------
async function startAgent() {
  tmp = mkdtempSync(join(tmpdir(), 'gf-web-test-'));
  const portFile = join(tmp, 'port');
  let cmd;
  let args;
  if (useMock) {
    cmd = process.execPath;
    args = [join(webDir, 'dev/mock-server.mjs'), '--port', '0', '--static', dist, '--binary', binary];
  } else {
    cmd = binary;
    const config = join(tmp, 'agent.json');
    writeFileSync(config, JSON.stringify({ alerts: { high_gpu_usage: { duration_s: ALERT_AFTER_S } } }));
    args = ['serve', '--backend', 'sim', '--listen', '127.0.0.1:0', '--static', dist, '--port-file', portFile, '--db', join(tmp, 'db'),
      '--config', config];
  }
  agentStartedAt = Date.now();
  agent = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  const spawnError = new Promise((_, rej) => agent.once('error', (e) => rej(new SetupError(`cannot start ${cmd}: ${e.message}`))));
  spawnError.catch(() => {});
  const keep = (d) => {
    agentLog = (agentLog + d).slice(-8000);
  };
  agent.stdout.on('data', keep);
  agent.stderr.on('data', keep);
  const port = await Promise.race([
    spawnError,
    until(
      'the agent to write its port',
      () => {
        if (agent.exitCode !== null || agent.signalCode !== null)
          throw new SetupError(`the agent exited (${agent.exitCode ?? agent.signalCode}) before listening:\n${agentLog}`);
        if (useMock) return /http:\/\/127\.0\.0\.1:(\d+)\//.exec(agentLog)?.[1];
        if (!existsSync(portFile)) return null;
        const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
        return m && Number(m[1]) > 0 ? m[1] : null;
      },
      20_000,
    ).catch((e) => {
      throw e instanceof SetupError ? e : new SetupError(`${e.message}\nagent output:\n${agentLog}`);
    }),
  ]);
  return `http://127.0.0.1:${port}`;
}

// --- the run ---------------------------------------------------------------------------------------------
async function main() {
  if (!existsSync(join(dist, 'index.html')))
    throw new SetupError(`${dist}/index.html is missing: build the dashboard first (make web, or: cd web && npm ci && npm run build)`);
  if (!existsSync(chromiumPath))
    throw new SetupError(`no browser at ${chromiumPath}: apt-get install -y --no-install-recommends chromium (or set GF_CHROMIUM)`);
  if (!useMock && !existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);

  const require = createRequire(join(webDir, 'package.json'));
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch {
    throw new SetupError('playwright-core is not installed: cd web && npm ci');
  }

  const base = await startAgent();
  console.log(`# agent: ${useMock ? 'mock' : binary} at ${base}`);
  const apiDoc = await until('the snapshot API', async () => {
    const r = await fetch(`${base}/api/v1/monitoring/gpu-metrics`);
    return r.ok ? r.json() : null;
  });
  const gpuCount = apiDoc.gpus?.length ?? 0;

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(`console: ${m.text()}`));
  const apiStatus = new Map(); // path → last status
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/api/')) apiStatus.set(u.pathname + (u.searchParams.get('metric') ? `?metric=${u.searchParams.get('metric')}` : ''), r.status());
  });
  const wsFrames = [];
  page.on('websocket', (ws) => ws.on('framereceived', (f) => typeof f.payload === 'string' && wsFrames.push(f.payload)));

  const resp = await page.goto(base + '/', { waitUntil: 'load' });
  const loadedAfterS = (Date.now() - agentStartedAt) / 1000;

  await check('the page is served at /', async () => {
    assert(resp?.status() === 200, `GET / answered ${resp?.status()}`);
    assert((await page.title()) === 'gpufleet', `title is "${await page.title()}"`);
  });

  await check(`one card per GPU (${gpuCount} in the sim document), names contain "Simulated"`, async () => {
    assert(gpuCount >= 2, `the default sim scenario should have at least 2 GPUs, the API has ${gpuCount}`);
    await until('GPU cards', async () => (await page.locator('.gpu-card').count()) === gpuCount);
    const names = await page.locator('.gpu-card .gpu-name').allTextContents();
    assert(names.every((n) => n.includes('Simulated')), `names: ${JSON.stringify(names)}`);
    const idx = await page.locator('.gpu-card .gpu-index').allTextContents();
    assert(idx[0] === 'GPU 0' && idx[1] === 'GPU 1', `indices: ${JSON.stringify(idx)}`);
  });

  await check('the SIMULATED badge shows', async () => {
    await page.locator('#simulated-badge').waitFor({ state: 'visible', timeout: 5000 });
    assert((await page.locator('#simulated-badge').textContent()) === 'SIMULATED', 'badge text');
  });

  await check('the header names node, backend and driver', async () => {
    const node = (await page.locator('#node-name').textContent()) ?? '';
    assert(node !== '' && node !== 'n/a', `node is "${node}"`);
    assert((await page.locator('#backend').textContent()) === 'sim', 'backend');
    assert(((await page.locator('#driver').textContent()) ?? '').startsWith('simulated'), 'driver version');
  });

  await check('the WebSocket is live', async () => {
    await until('link state live', async () => (await page.locator('#link-state').getAttribute('data-state')) === 'live', 10_000);
  });

  const fieldsDoc = await (await fetch(`${base}/api/v1/fields`)).json();
  const fieldOf = (key) => fieldsDoc.fields.find((f) => f.key === key);

  await check('card readings are numbers or n/a, never NaN/undefined; units from /api/v1/fields', async () => {
    const text = await page.locator('#gpus').innerText();
    assert(!/NaN|undefined|null/.test(text), `cards contain: ${/.{0,30}(NaN|undefined|null).{0,30}/.exec(text)?.[0]}`);
    // The units come with the field table, which may arrive just after the first reading.
    const util = await until('utilization with its unit', async () => {
      const t = await page.locator('.gpu-card .value.util').first().textContent();
      return t?.endsWith(` ${fieldOf('utilization').unit}`) ? t : null;
    }, 5000);
    assert(/^\d+ %$/.test(util ?? ''), `GPU 0 utilization reads "${util}"`);
    const mem = await page.locator('.gpu-card .value.mem').first().textContent();
    assert(new RegExp(`${fieldOf('memory.used').unit} / [\\d,]+ ${fieldOf('memory.total').unit}$`).test(mem ?? ''), `GPU 0 memory reads "${mem}"`);
  });

  await check('card labels are the field table\'s labels', async () => {
    const card = page.locator('.gpu-card').first();
    const labels = await card.locator('.meter .label, .stat .label').allTextContents();
    for (const key of ['utilization', 'memory.used', 'temperature', 'power_usage', 'fan_speed', 'performance_state', 'availability_score'])
      assert(labels.includes(fieldOf(key).label), `no "${fieldOf(key).label}" (${key}) among ${JSON.stringify(labels)}`);
    const temp = await card.locator('.stat', { hasText: fieldOf('temperature').label }).locator('.value').textContent();
    assert(temp === 'n/a' || temp.endsWith(` ${fieldOf('temperature').unit}`), `temperature reads "${temp}"`);
  });

  await check('a missing value says why in its tooltip (GPU 2 of the demo has no fan)', async () => {
    const fan = page.locator('.gpu-card[data-gpu-index="2"] .stat', { hasText: 'fan' }).locator('.value');
    // The label and the reason's text come from /api/v1/fields; until it arrives the key and code stand in.
    let title = null;
    await until('the fan reason with the label from /api/v1/fields', async () => (title = await fan.getAttribute('title')) === 'fan: not supported', 10_000)
      .catch((e) => { throw new Error(`${e.message}; the tooltip is "${title}"`); });
    const text = await fan.textContent();
    assert(text === 'n/a', `GPU 2 fan reads "${text}"`);
    const present = await page.locator('.gpu-card[data-gpu-index="0"] .stat', { hasText: 'fan' }).locator('.value').getAttribute('title');
    assert(present === null, `GPU 0 fan has a value but a tooltip "${present}"`);
  });
  const shared = { base, gpuCount, page, pageErrors, apiStatus, wsFrames, loadedAfterS, fieldsDoc };
  await chartChecks(shared);
  await eventChecks(shared);
}

/** The charts, the chart picker, the panels and the period selector. */
async function chartChecks({ gpuCount, page, apiStatus, wsFrames, fieldsDoc }) {
  await check('four chart canvases, and the utilization chart gains points as updates arrive', async () => {
    await until('4 chart canvases', async () => (await page.locator('.chart-plot canvas').count()) === 4);
    const points = async () => Number(await page.locator('#chart-utilization').getAttribute('data-points'));
    const before = await until('a first chart point', async () => ((await points()) > 0 ? await points() : 0));
    const after = await until('more chart points', async () => ((await points()) > before ? await points() : 0), 10_000);
    const xs = await page.evaluate(() => document.querySelectorAll('#chart-utilization .u-legend .u-series').length);
    assert(xs === gpuCount + 1, `legend has ${xs} rows for ${gpuCount} GPUs`);
    console.log(`#    utilization chart: ${before} → ${after} points`);
  });

  await check('the charted metrics are chosen from the field table\'s history metrics, and the choice is kept', async () => {
    const historic = fieldsDoc.fields.filter((f) => f.history_metric);
    await page.locator('#chart-picker summary').click();
    const boxes = page.locator('#chart-picker input[type="checkbox"]');
    assert((await boxes.count()) === historic.length, `${await boxes.count()} choices for ${historic.length} history metrics`);
    const names = await boxes.evaluateAll((els) => els.map((e) => e.name));
    assert(JSON.stringify(names) === JSON.stringify(historic.map((f) => f.history_metric)), `choices ${JSON.stringify(names)}`);
    const fan = historic.find((f) => f.key === 'fan_speed');
    await page.locator(`#chart-picker input[name="${fan.history_metric}"]`).check();
    await until('the fan chart', async () => (await page.locator(`#chart-${fan.history_metric} canvas`).count()) === 1, 5000);
    const title = (await page.locator(`#chart-${fan.history_metric}`).locator('xpath=..').locator('figcaption').textContent()) ?? '';
    assert(title.toLowerCase().startsWith(fan.label.toLowerCase()) && title.includes(fan.unit), `fan chart titled "${title}"`);
    await page.reload();
    await until('5 charts after a reload', async () => (await page.locator('#charts .chart-plot canvas').count()) === 5, 10_000);
    await page.locator('#chart-picker summary').click();
    await page.locator(`#chart-picker input[name="${fan.history_metric}"]`).uncheck();
    await until('4 charts again', async () => (await page.locator('#charts .chart-plot canvas').count()) === 4, 5000);
    await until('the link live again', async () => (await page.locator('#link-state').getAttribute('data-state')) === 'live', 10_000);
  });

  await check('the history endpoint seeded all four charts (HTTP 200)', async () => {
    for (const m of ['utilization', 'memory_used', 'temperature', 'power']) {
      const s = await until(`history ${m}`, async () => apiStatus.get(`/api/v1/history?metric=${m}`), 5000);
      assert(s === 200, `history ${m} answered ${s}`);
    }
  });

  await check('the processes table lists pid 31337', async () => {
    const row = page.locator('#processes tr[data-pid="31337"]');
    await row.waitFor({ timeout: 5000 });
    const cells = await row.locator('td').allTextContents();
    assert(cells[1] === 'alice', `user cell is "${cells[1]}"`);
    assert(cells[2].includes('python3'), `command cell is "${cells[2]}"`);
    assert(cells[4] === '0', `GPU cell is "${cells[4]}"`);
    assert(/^[\d,]+ MiB$/.test(cells[5]), `memory cell is "${cells[5]}"`);
  });

  await check('alerts, leases and jobs load without errors', async () => {
    await until('leases and jobs', async () => (await page.locator('#leases .empty, #leases table').count()) > 0 && (await page.locator('#jobs .empty, #jobs table').count()) > 0, 12_000);
    for (const p of ['/api/v1/alerts', '/api/v1/leases', '/api/v1/jobs', '/api/health'])
      assert(apiStatus.get(p) === 200, `${p} answered ${apiStatus.get(p)}`);
    const errs = await page.locator('main .error').allTextContents();
    assert(errs.length === 0, `errors shown: ${JSON.stringify(errs)}`);
    const badge = (await page.locator('#alerts-firing').textContent()) ?? '';
    assert(/^\d+ alerts? firing$/.test(badge), `alerts badge "${badge}"`);
  });

  await check('the period selector sends set_period and the agent confirms it', async () => {
    const seen = wsFrames.length;
    await page.selectOption('#period', '500');
    await until('a period reply', () =>
      wsFrames.slice(seen).some((f) => {
        try {
          const m = JSON.parse(f);
          return m.event === 'period' && m.data?.period_ms === 500;
        } catch {
          return false;
        }
      }), 5000);
    assert((await page.locator('#period').inputValue()) === '500', 'selector shows 0.5 s');
  });
}

/** Alerts over the WebSocket, the mock's routes, and the page's errors. */
async function eventChecks({ base, page, pageErrors, wsFrames, loadedAfterS }) {
  if (!useMock) {
    await check('an alert that fires while the page is open arrives over the WebSocket and shows', async () => {
      // GPU 0 of the scenario runs hot; other simulated GPUs may cross 50 % now and then and fire first.
      const firingList = page.locator('#alerts-firing-list li[data-rule]').filter({ hasText: /GPU 0\b/ });
      await until('GPU 0 firing in the list', async () => (await firingList.count()) > 0, 20_000);
      const text = await firingList.first().innerText();
      assert(/high gpu usage/.test(text) && /GPU 0/.test(text), `firing list reads "${text}"`);
      const badge = (await page.locator('#alerts-firing').textContent()) ?? '';
      assert(/^[1-9]\d* alerts? firing$/.test(badge), `alerts badge "${badge}"`);
      assert((await page.locator('#alerts-recent tr.firing').count()) > 0, 'no firing row under Recent');
      const viaWs = wsFrames.some((f) => /^\{"event":"[a-z_]+_alert"/.test(f) && f.includes('"firing"'));
      if (loadedAfterS < ALERT_AFTER_S - 1) assert(viaWs, 'no *_alert frame came over the WebSocket');
      else console.log(`#    the page loaded ${loadedAfterS.toFixed(1)} s after the agent started: the alert may have come from GET /api/v1/alerts`);
    });
  }

  if (useMock) {
    // `npm run mock` serves what the experiments pages read, shaped like the agent's documents.
    await check('mock: /api/gpu/summary counts available as utilization ≤ 50 %, as the agent does', async () => {
      const [sum, d] = await Promise.all([(await fetch(`${base}/api/gpu/summary`)).json(), (await fetch(`${base}/api/v1/monitoring/gpu-metrics`)).json()]);
      const ok = d.gpus.filter((g) => g.health === 'ok' && typeof g.utilization === 'number');
      // The two reads are a second apart at most: compare with the document the summary was made from.
      assert(sum.available_gpus + sum.busy_gpus === ok.length, `available ${sum.available_gpus} + busy ${sum.busy_gpus} of ${ok.length}`);
      assert(sum.available_gpus === ok.filter((g) => g.utilization <= 50).length || sum.timestamp !== d.timestamp, `available ${sum.available_gpus}`);
    });

    await check('mock: the experiments list is paged by the server, with the GPU column\'s three cases', async () => {
      const first = await (await fetch(`${base}/api/v1/jobs?limit=25&offset=0&series=false`)).json();
      await page.goto(`${base}/#/experiments`);
      const rows = page.locator('#exp-table tbody tr');
      await until('rows', async () => (await rows.count()) === Math.min(25, first.total), 5000);
      assert((await page.locator('#exp-list h2 .count').textContent()) === String(first.total), 'total');
      const cell = (id) => page.locator(`#exp-table tr[data-id="${id}"] td.gpu-col`).innerText();
      const withMon = first.jobs.find((j) => j.gpu_info && j.metrics?.gpu_monitoring);
      const noMon = first.jobs.find((j) => j.gpu_info && !j.metrics);
      const noGpu = first.jobs.find((j) => !j.gpu_info);
      assert((await cell(withMon.id)).trim() === `${withMon.gpu_info.count} (${withMon.gpu_info.model.replace(/^NVIDIA\s+/, '')}) 📊`, `with data: "${await cell(withMon.id)}"`);
      assert(!(await cell(noMon.id)).includes('📊'), `without data: "${await cell(noMon.id)}"`);
      assert((await cell(noGpu.id)).trim() === 'N/A', `without GPUs: "${await cell(noGpu.id)}"`);
      const paged = await (await fetch(`${base}/api/v1/jobs?limit=5&offset=5&status=succeeded`)).json();
      assert(paged.jobs.length === 5 && paged.offset === 5 && paged.jobs.every((j) => j.status === 'succeeded'), 'paging and status filter');
    });

    await check('mock: tasks grouped with their totals, and one run\'s detail from /api/v1/jobs/{id}', async () => {
      const tasks = await (await fetch(`${base}/api/v1/tasks`)).json();
      await page.goto(`${base}/#/experiments?view=tasks`);
      const groups = page.locator('#task-groups .task-group');
      await until('task groups', async () => (await groups.count()) === tasks.tasks.length, 5000);
      const t = tasks.tasks[0];
      const g = page.locator(`.task-group[data-task="${t.task}"]`);
      assert((await g.locator('.task-total[data-k="runs"] strong').textContent()) === String(t.runs), 'runs');
      await until('its runs', async () => (await g.locator('tbody tr').count()) === Math.min(10, t.runs), 5000);
      const id = await g.locator('tbody tr').first().getAttribute('data-id');
      const rec = await (await fetch(`${base}/api/v1/jobs/${id}`)).json();
      await page.goto(`${base}/#/experiments/${id}`);
      await until('the detail', async () => (await page.locator('#exp-detail').getAttribute('data-id')) === id, 5000);
      assert((await page.locator('#sum-samples').textContent()) === String(rec.metrics.gpu_monitoring.sample_count), 'samples');
      await until('4 charts', async () => (await page.locator('.exp-charts canvas').count()) === 4, 5000);
    });
  }

  await check('no errors in the page', async () => {
    assert(pageErrors.length === 0, pageErrors.join(' | '));
  });
}

suite(useMock ? 'dashboard (mock)' : 'dashboard', { timeoutMs: OVERALL_TIMEOUT_MS, cleanup }, main);
