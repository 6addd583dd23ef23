#!/usr/bin/env node
// Browser test of the experiments pages against the real agent on the fake NVML (tests/fakes/fake_nvml.cpp):
// `gpufleet serve` reading three GPUs whose readings never change, one run recorded by `gpufleet run`
// through the agent (2 GPUs, sampled), and records written over the agent's socket for the cases a run
// cannot make on demand (GPUs but no monitoring data, no GPUs, a task grid of 26 older runs to page
// through). The detail's numbers are checked against the scenario (a constant reading has that value as its
// mean, min, max and p95) and against the record. On node:test (harness.mjs): a TAP report, non-zero exit
// on a failure.
//
//   GF_BINARY=build/gpufleet GF_FAKE_NVML=build/tests/libnvidia-ml-fake.so node web/tests/experiments.test.mjs
//   GF_CHROMIUM   browser binary (default /usr/bin/chromium)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { assert, check, SetupError, sleep, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(webDir, '..');
const dist = join(webDir, 'dist');
const binary = resolve(process.env.GF_BINARY ?? join(repo, 'build/gpufleet'));
const fakeNvml = resolve(process.env.GF_FAKE_NVML ?? join(repo, 'build/tests/libnvidia-ml-fake.so'));
// Three GPUs whose readings never change (as python/tests/conftest.py's): GPU 0 idle, GPU 1 half used,
// GPU 2 busy (above the 50 % ceiling: a run is never given it).
const SCENARIO = {
  driver_version: '535.0',
  cuda_driver_version: 12020,
  gpus: [
    [1000, 10, 40, 100.0],
    [40000, 30, 50, 200.0],
    [80000, 90, 70, 350.0],
  ].map(([used, util, temp, power], i) => ({
    uuid: `GPU-00000000-0000-4000-8000-00000000000${i + 1}`, name: 'NVIDIA A100-SXM4-80GB', pci_bus_id: `00000000:0${i + 1}:00.0`,
    memory_total_mib: 81920, memory_used_mib: used, utilization_gpu_pct: util, utilization_memory_pct: 5, temperature_c: temp,
    power_draw_w: power, power_limit_w: 400.0,
  })),
};
let nvmlEnv = null; // the environment that makes gpufleet (agent or CLI) read the fake NVML
const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
const OVERALL_TIMEOUT_MS = 150_000;
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const PAGE_SIZE = 25;
const FILLERS = 26;

let agent = null;
let liveRun = null;
let browser = null;
let tmp = null;
let agentLog = '';

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
  await stop(liveRun);
  liveRun = null;
  await stop(agent);
  agent = null;
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
}

async function startAgent(socket) {
  const portFile = join(tmp, 'port');
  agent = spawn(binary, ['serve', '--backend', 'nvml', '--interval', '0.2', '--listen', '127.0.0.1:0', '--static', dist, '--port-file', portFile,
    '--db', join(tmp, 'db'), '--socket', socket], { stdio: ['ignore', 'pipe', 'pipe'], env: nvmlEnv });
  const keep = (d) => {
    agentLog = (agentLog + d).slice(-8000);
  };
  agent.stdout.on('data', keep);
  agent.stderr.on('data', keep);
  const port = await until('the agent to write its port', () => {
    if (agent.exitCode !== null || agent.signalCode !== null) throw new SetupError(`the agent exited before listening:\n${agentLog}`);
    if (!existsSync(portFile)) return null;
    const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
    return m && Number(m[1]) > 0 ? m[1] : null;
  }, 20_000).catch((e) => {
    throw e instanceof SetupError ? e : new SetupError(`${e.message}\nagent output:\n${agentLog}`);
  });
  await until('the agent socket', () => existsSync(socket), 10_000);
  return `http://127.0.0.1:${port}`;
}

/** Writes job records over the agent's socket (op job_put, docs/agent-socket.md); resolves to their ids. */
function putJobs(socket, jobs) {
  return new Promise((resolveAll, reject) => {
    const c = net.createConnection(socket);
    let buf = '';
    let greeted = false;
    const ids = [];
    const timer = setTimeout(() => {
      c.destroy();
      reject(new SetupError('the agent socket did not answer job_put'));
    }, 20_000);
    c.on('error', (e) => reject(new SetupError(`agent socket: ${e.message}`)));
    c.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (!greeted) {
          greeted = true;
          jobs.forEach((job, i) => c.write(JSON.stringify({ id: i + 1, op: 'job_put', job }) + '\n'));
          continue;
        }
        if (!line.ok) {
          clearTimeout(timer);
          c.destroy();
          reject(new SetupError(`job_put: ${JSON.stringify(line.error)}`));
          return;
        }
        ids.push(line.job_id);
        if (ids.length === jobs.length) {
          clearTimeout(timer);
          c.end();
          resolveAll(ids);
        }
      }
    });
  });
}

function runCli(args) {
  return new Promise((res) => {
    const p = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env: nvmlEnv });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => res({ code, out, err }));
  });
}

async function main() {
  if (!existsSync(join(dist, 'index.html'))) throw new SetupError(`${dist}/index.html is missing: make web first`);
  if (!existsSync(chromiumPath)) throw new SetupError(`no browser at ${chromiumPath} (set GF_CHROMIUM)`);
  if (!existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);
  const require = createRequire(join(webDir, 'package.json'));
  const { chromium } = require('playwright-core');

  if (!existsSync(fakeNvml)) throw new SetupError(`no fake NVML at ${fakeNvml} (cmake --build build --target fake_nvml; ctest sets GF_FAKE_NVML)`);
  tmp = mkdtempSync(join(tmpdir(), 'gf-exp-test-'));
  const scenario = join(tmp, 'scenario.json');
  writeFileSync(scenario, JSON.stringify(SCENARIO));
  nvmlEnv = { ...process.env, NO_COLOR: '1', GPUFLEET_NVML_LIBRARY: fakeNvml, FAKE_NVML_SCENARIO: scenario };
  const socket = join(tmp, 'agent.sock');
  const base = await startAgent(socket);
  console.log(`# agent at ${base}`);
  const getJson = async (path) => {
    const r = await fetch(base + path);
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  };

  // --- the records ---------------------------------------------------------------------------------------
  const now = Date.now();
  const fillers = Array.from({ length: FILLERS }, (_, i) => ({
    name: `sweep [lr=${i}]`, task: 'sweep', status: i % 4 === 0 ? 'failed' : 'succeeded', command: ['train', `--lr=${i}`],
    exit_code: i % 4 === 0 ? 1 : 0, started_at_ms: now - 3_600_000 - i * 1000, ended_at_ms: now - 3_000_000 - i * 1000,
    record: { gpu_info: { model: 'NVIDIA H100 80GB HBM3', count: 1, device_ids: ['0'] } },
  }));
  const [nomonId, nogpuId] = await putJobs(socket, [
    { name: 'no-monitoring', status: 'succeeded', command: ['true'], exit_code: 0, started_at_ms: now - 60_000, ended_at_ms: now - 59_000,
      record: { gpu_info: { model: 'NVIDIA H100 80GB HBM3', count: 1, device_ids: ['1'], gpu_info: { count: 1, indices: [1] } } } },
    { name: 'no-gpus', status: 'no_gpus', command: ['true'], started_at_ms: now - 120_000, ended_at_ms: now - 119_000,
      record: { error: 'not enough GPUs' } },
  ]);
  await putJobs(socket, fillers);
  const run = await runCli(['--backend', 'nvml', '--socket', socket, 'run', '--gpus', '2', '--min-memory-mb', '1000', '-n', '0.1',
    '--name', 'bench', '--', 'sh', '-c', 'sleep 1.5; exit 3']);
  if (run.code !== 3) throw new SetupError(`gpufleet run exited ${run.code}: ${run.err}`);
  const benchId = /job ([0-9a-zA-Z._-]+) /.exec(run.err)?.[1];
  if (!benchId) throw new SetupError(`no job id in: ${run.err}`);
  const bench = await getJson(`/api/v1/jobs/${benchId}`);
  const mon = bench.metrics?.gpu_monitoring;
  if (!mon?.series || Object.keys(mon.series).length !== 2) throw new SetupError(`the run has no 2-GPU series: ${JSON.stringify(mon)?.slice(0, 300)}`);
  const total = FILLERS + 3;

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
  const ctx = await browser.newContext({ viewport: { width: 1300, height: 1000 } });
  const pageErrors = [];
  const jobRequests = [];
  const oneRequests = [];
  const watch = (p) => {
    p.on('pageerror', (e) => pageErrors.push(e.message));
    // The injected 500 below is logged by Chromium itself as a failed resource: not the page's error.
    p.on('console', (m) => m.type() === 'error' && !/Failed to load resource/.test(m.text()) && pageErrors.push(`console: ${m.text()}`));
    p.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === '/api/v1/jobs') jobRequests.push(u.searchParams);
      if (/^\/api\/v1\/(jobs|experiments)\/./.test(u.pathname)) oneRequests.push(u.pathname);
    });
  };
  const page = await ctx.newPage();
  watch(page);
  await page.goto(`${base}/#/experiments`, { waitUntil: 'load' });
  const rows = page.locator('#exp-table tbody tr');
  const gpuCell = (id) => page.locator(`#exp-table tr[data-id="${id}"] td.gpu-col`);

  await check(`the list: newest first, a page of ${PAGE_SIZE}, the total from the server`, async () => {
    await until('rows', async () => (await rows.count()) === PAGE_SIZE);
    assert((await rows.first().getAttribute('data-id')) === benchId, 'the run made last is not first');
    assert((await page.locator('#exp-list h2 .count').textContent()) === String(total), 'total');
    // The node view's own poll of /api/v1/jobs (no paging) may come between: the list's names a limit.
    const last = jobRequests.filter((q) => q.has('limit')).at(-1);
    assert(last?.get('limit') === String(PAGE_SIZE) && last?.get('offset') === '0' && last?.get('series') === 'false', `request ${last}`);
  });

  await check('the run got the two idle GPUs of the scenario (not the busy one)', async () => {
    assert(JSON.stringify(bench.gpu_info.gpu_info.indices) === '[0,1]', `indices ${JSON.stringify(bench.gpu_info.gpu_info.indices)}`);
    assert(bench.gpu_info.model === SCENARIO.gpus[0].name, `model ${bench.gpu_info.model}`);
  });

  await check('the GPU column: count, model without the vendor word, 📊 with data', async () => {
    const text = (await gpuCell(benchId).innerText()).trim();
    assert(text === '2 (A100-SXM4-80GB) 📊', `bench reads "${text}"`);
    const mark = gpuCell(benchId).locator('.mon-mark');
    assert((await mark.getAttribute('title')) === 'GPU monitoring data available', 'mark title');
  });

  await check('the GPU column without monitoring data: no 📊', async () => {
    const text = (await gpuCell(nomonId).innerText()).trim();
    assert(text === '1 (H100 80GB HBM3)', `reads "${text}"`);
    assert((await gpuCell(nomonId).locator('.mon-mark').count()) === 0, 'has a mark');
  });

  await check('the GPU column without GPUs: N/A', async () => {
    assert((await gpuCell(nogpuId).innerText()).trim() === 'N/A', `reads "${await gpuCell(nogpuId).innerText()}"`);
  });

  await check('the row shows task, status, user, exit status and command', async () => {
    const cells = await page.locator(`#exp-table tr[data-id="${benchId}"] td`).allInnerTexts();
    assert(cells[2].trim() === 'failed', `status "${cells[2]}"`);
    assert(cells[3].trim() === bench.user, `user "${cells[3]}" vs ${bench.user}`);
    assert(cells[6].trim() === '3', `exit "${cells[6]}"`);
    assert(cells[7].includes('sleep 1.5'), `command "${cells[7]}"`);
    const filler = await page.locator('#exp-table tbody tr').nth(3).locator('td').nth(1).innerText();
    assert(filler.trim() === 'sweep', `task "${filler}"`);
  });
  const shared = { socket, base, getJson, fillers, benchId, bench, mon, total, ctx, pageErrors, jobRequests, oneRequests, watch, page, rows };
  await taskChecks(shared);
  await detailChecks(shared);
  await laterChecks(shared);
}

/** Paging, the status filter, back and forward, and the runs grouped by task. */
async function taskChecks({ base, getJson, fillers, total, jobRequests, page, rows }) {
  await check('the next page asks the server for offset 25 and shows the rest; the URL says page=2', async () => {
    const n = jobRequests.length;
    await page.locator('#page-next').click();
    await until('the page 2 request', async () => jobRequests.slice(n).some((q) => q.get('offset') === String(PAGE_SIZE)));
    await until('4 rows', async () => (await rows.count()) === total - PAGE_SIZE);
    assert(page.url().endsWith('#/experiments?page=2'), page.url());
  });

  const failed = (await getJson('/api/v1/jobs?status=failed&limit=1')).total;
  await check('a status filter goes to the server and into the URL', async () => {
    const n = jobRequests.length;
    await page.locator('#filter-status').selectOption('failed');
    await until('a status=failed request', async () => jobRequests.slice(n).some((q) => q.get('status') === 'failed' && q.get('offset') === '0'));
    await until(`${failed} failed rows`, async () => (await rows.count()) === failed && (await page.locator('#exp-table .badge.job.failed').count()) === failed);
    assert(/status=failed/.test(page.url()) && !/page=/.test(page.url()), page.url());
  });

  await check('back and forward move between the filtered list and page 2', async () => {
    await page.goBack();
    await until('page 2 again', async () => page.url().endsWith('?page=2') && (await rows.count()) === total - PAGE_SIZE);
    await page.goForward();
    await until('the filter again', async () => /status=failed/.test(page.url()) && (await rows.count()) === failed);
  });

  const nFailed = fillers.filter((f) => f.status === 'failed').length;
  const hours = fillers.reduce((a, f) => a + (f.ended_at_ms - f.started_at_ms) / 3.6e6, 0);
  const totalsOf = async (scope) => {
    const k = async (key) => (await scope.locator(`.task-total[data-k="${key}"] strong`).textContent())?.trim();
    return { runs: await k('runs'), succeeded: await k('succeeded'), failed: await k('failed'), gpuHours: await k('gpu-hours') };
  };
  const wantTotals = { runs: String(FILLERS), succeeded: String(FILLERS - nFailed), failed: String(nFailed), gpuHours: hours.toFixed(2) };

  await check('grouped by task: the task\'s runs under its heading, with the totals of all its runs', async () => {
    await page.goto(`${base}/#/experiments?view=tasks`);
    const group = page.locator('#task-groups .task-group');
    await until('one task group', async () => (await group.count()) === 1);
    assert((await group.getAttribute('data-task')) === 'sweep', `group ${await group.getAttribute('data-task')}`);
    assert(((await group.locator('h3').textContent()) ?? '').startsWith('sweep'), 'heading');
    const got = await totalsOf(group);
    assert(JSON.stringify(got) === JSON.stringify(wantTotals), `totals ${JSON.stringify(got)}, want ${JSON.stringify(wantTotals)}`);
    // Its newest runs beneath (the record's, newest first), and a link to all of them.
    await until('10 runs under the heading', async () => (await group.locator('tbody tr').count()) === 10);
    const ids = await group.locator('tbody tr').evaluateAll((trs) => trs.map((t) => t.dataset.id));
    const newest = (await getJson('/api/v1/jobs?task=sweep&limit=10&series=false')).jobs.map((j) => j.id);
    assert(JSON.stringify(ids) === JSON.stringify(newest), `runs ${ids} vs ${newest}`);
    assert((await group.locator('tbody td:nth-child(2)').allInnerTexts()).every((t) => t.trim() === 'sweep'), 'a run of another task');
    const more = group.locator('.more a');
    assert(((await more.textContent()) ?? '').includes(`all ${FILLERS} runs`), `link "${await more.textContent()}"`);
    await more.click();
    await until('the list of the task', async () => /task=sweep/.test(page.url()) && (await rows.count()) === PAGE_SIZE);
    // Filtered to the task, the list carries the same totals at its head.
    const head = page.locator('#list-task-totals');
    await head.waitFor({ timeout: 5000 });
    const again = await totalsOf(head);
    assert(JSON.stringify(again) === JSON.stringify(wantTotals), `list totals ${JSON.stringify(again)}`);
  });
}

/** One run's detail, opened cold: its summary, stats table, lease and charts. */
async function detailChecks({ base, getJson, benchId, bench, mon, ctx, oneRequests, watch, rows }) {
  // A deep link opened cold: a new page, straight to the run.
  const detail = await ctx.newPage();
  watch(detail);
  await detail.goto(`${base}/#/experiments/${benchId}`, { waitUntil: 'load' });

  await check('a deep link opened cold shows the run\'s detail', async () => {
    await detail.locator('#exp-detail').waitFor({ timeout: 10_000 });
    assert((await detail.locator('#exp-detail').getAttribute('data-id')) === benchId, 'another run');
  });

  await check('the detail was read from /api/v1/jobs/{id} (the alias /api/v1/experiments/{id} is the seeds\')', async () => {
    assert(oneRequests.includes(`/api/v1/jobs/${benchId}`), `requests ${JSON.stringify(oneRequests)}`);
    assert(!oneRequests.some((p) => p.startsWith('/api/v1/experiments/')), `requests ${JSON.stringify(oneRequests)}`);
  });

  await check('the summary box: the monitoring duration, the job\'s beside it when it differs, the samples', async () => {
    const s1 = (v) => `${v.toFixed(1)} s`;
    assert((await detail.locator('#sum-samples').textContent()) === String(mon.sample_count), 'sample count');
    assert(typeof mon.monitoring_duration_seconds === 'number', `the record has no monitoring duration: ${JSON.stringify(mon).slice(0, 200)}`);
    const shown = await detail.locator('#sum-duration').textContent();
    assert(shown === s1(mon.monitoring_duration_seconds), `duration "${shown}" vs monitoring ${mon.monitoring_duration_seconds}`);
    const job = detail.locator('#sum-job-duration');
    console.log(`#    monitored ${mon.monitoring_duration_seconds} s of a ${bench.duration_seconds} s job`);
    if (s1(mon.monitoring_duration_seconds) !== s1(bench.duration_seconds)) {
      assert((await job.textContent()) === s1(bench.duration_seconds), `job duration "${await job.textContent()}" vs ${bench.duration_seconds}`);
      const labels = await detail.locator('#exp-summary .muted').allTextContents();
      assert(labels.includes('monitoring duration') && labels.includes('job duration'), `labels ${JSON.stringify(labels)}`);
    } else {
      assert((await job.count()) === 0, 'a second duration equal to the first');
    }
  });

  await check('the stats table shows the scenario\'s readings (constant: mean = min = max = p95)', async () => {
    // The run's GPUs are 0 and 1; memory is a share of the 81920 MiB total.
    const want = {
      0: { utilization: 10, memory: (1000 / 81920) * 100, temperature: 40, power: 100 },
      1: { utilization: 30, memory: (40000 / 81920) * 100, temperature: 50, power: 200 },
    };
    for (const [gpu, metrics] of Object.entries(want))
      for (const [metric, v] of Object.entries(metrics)) {
        const cell = detail.locator(`#exp-stats td.stat[data-gpu="${gpu}"][data-metric="${metric}"]`);
        const f = v.toFixed(1);
        const got = [await cell.locator('.mean').textContent(), await cell.locator('.range').textContent(), await cell.locator('.p95').textContent()];
        assert(JSON.stringify(got) === JSON.stringify([f, `${f}–${f}`, `p95 ${f}`]), `GPU ${gpu} ${metric}: ${JSON.stringify(got)}, want ${f}`);
      }
    assert((await detail.locator('#exp-stats tbody tr').count()) === 2, 'rows');
    const model = await detail.locator('#exp-stats tbody tr').first().locator('td').nth(1).textContent();
    assert(model === 'A100-SXM4-80GB', `model "${model}"`);
  });

  await check('the stats table\'s and the charts\' labels and units come from /api/v1/fields', async () => {
    const fields = (await getJson('/api/v1/fields')).fields;
    const f = (key) => fields.find((x) => x.key === key);
    const heads = await detail.locator('#exp-stats thead th').allTextContents();
    for (const [metric, key, unit] of [['utilization', 'utilization', f('utilization').unit], ['memory', 'memory.used', '%'], ['temperature', 'temperature', f('temperature').unit], ['power', 'power_usage', f('power_usage').unit]]) {
      const th = (await detail.locator(`#exp-stats thead th[data-metric="${metric}"]`).textContent())?.trim();
      assert(th === `${f(key).label} ${unit}`, `${metric} header "${th}" among ${JSON.stringify(heads)}`);
      const cap = (await detail.locator(`#chart-${metric}`).locator('xpath=..').locator('figcaption').textContent())?.trim() ?? '';
      assert(cap.toLowerCase() === `${f(key).label} ${unit}`.toLowerCase(), `${metric} chart "${cap}"`);
    }
  });

  await check('the stats table equals the record (p95, min–max, energy)', async () => {
    const f1 = (v) => (v === null || v === undefined ? 'n/a' : v.toFixed(1));
    const keys = { utilization: 'utilization', memory: 'memory_usage_percent', temperature: 'temperature_c', power: 'power_draw_w' };
    let compared = 0;
    for (const [gpu, st] of Object.entries(mon.gpu_stats)) {
      for (const [metric, key] of Object.entries(keys)) {
        const cell = detail.locator(`#exp-stats td.stat[data-gpu="${gpu}"][data-metric="${metric}"]`);
        const mean = await cell.locator('.mean').textContent();
        const range = await cell.locator('.range').textContent();
        const p95 = await cell.locator('.p95').textContent();
        assert(mean === f1(st[key]?.mean), `GPU ${gpu} ${metric} mean ${mean} vs ${st[key]?.mean}`);
        assert(range === `${f1(st[key]?.min)}–${f1(st[key]?.max)}`, `GPU ${gpu} ${metric} range ${range}`);
        assert(p95 === `p95 ${f1(st[key]?.p95)}`, `GPU ${gpu} ${metric} p95 ${p95}`);
        compared++;
      }
      // Energy: the record's joules, else the power samples integrated (what the page says it did).
      const s = mon.series[gpu];
      let wh = st.energy_joules !== null ? st.energy_joules / 3600 : 0;
      if (st.energy_joules === null)
        for (let i = 1; i < s.t.length; i++)
          if (s.power_draw_w[i] !== null && s.power_draw_w[i - 1] !== null) wh += ((s.power_draw_w[i] + s.power_draw_w[i - 1]) / 2) * (s.t[i] - s.t[i - 1]) / 3600;
      const shown = await detail.locator(`#exp-stats td.energy[data-gpu="${gpu}"]`).textContent();
      assert(shown === wh.toFixed(2), `GPU ${gpu} energy ${shown} vs ${wh.toFixed(2)}`);
    }
    assert(compared === 8, `compared ${compared} cells`);
  });

  await check('the lease and the efficiency line', async () => {
    assert((await detail.locator('#lease-cvd').textContent()) === bench.gpu_info.device_ids.join(','), 'CUDA_VISIBLE_DEVICES');
    assert(((await detail.locator('#lease-method').textContent()) ?? '').startsWith(bench.gpu_info.gpu_info.allocation_method), 'method');
    const eff = (await detail.locator('#efficiency').textContent()) ?? '';
    const gpuH = (2 * bench.duration_seconds) / 3600;
    const utils = Object.values(mon.gpu_stats).map((g) => g.utilization.mean);
    const mean = utils.reduce((a, b) => a + b, 0) / utils.length;
    assert(eff.includes(`${gpuH.toFixed(3)} GPU-h held`) && eff.includes(`${mean.toFixed(1)} %`), `efficiency "${eff}"`);
  });

  await check('four charts, one line per GPU, every sample drawn', async () => {
    await until('4 canvases', async () => (await detail.locator('.exp-charts .chart-plot canvas').count()) === 4);
    for (const id of ['chart-utilization', 'chart-memory', 'chart-temperature', 'chart-power']) {
      const el = detail.locator(`#${id}`);
      assert((await el.getAttribute('data-series')) === '2', `${id} series ${await el.getAttribute('data-series')}`);
      // The canvas is made before its data is set (useUPlot): wait for the samples, then count them all.
      const want = String(Object.values(mon.series)[0].t.length);
      await until(`${id} points`, async () => (await el.getAttribute('data-points')) === want, 5000);
      assert((await el.locator('.u-legend .u-series').count()) === 3, `${id} legend rows`);
    }
  });
}

/** The node view's link to a run, a running job, failures and render errors. */
async function laterChecks({ socket, base, benchId, pageErrors, page, rows }) {
  await check('the node view\'s job list links to the run', async () => {
    await page.goto(`${base}/#/`);
    const link = page.locator(`#jobs a[href="#/experiments/${benchId}"]`);
    await link.waitFor({ timeout: 15_000 });
    await link.click();
    await until('the detail', async () => (await page.locator('#exp-detail').getAttribute('data-id')) === benchId);
  });

  await check('a running job\'s detail polls and its series grows', async () => {
    let err = '';
    liveRun = spawn(binary, ['--backend', 'nvml', '--socket', socket, 'run', '--gpus', '1', '--min-memory-mb', '1000', '-n', '0.2',
      '--name', 'live', '--', 'sleep', '30'], { stdio: ['ignore', 'ignore', 'pipe'], env: nvmlEnv });
    liveRun.stderr.on('data', (d) => (err += d));
    const id = await until('the live job id', () => /job ([0-9a-zA-Z._-]+) on GPU/.exec(err)?.[1], 15_000);
    await page.goto(`${base}/#/experiments/${id}`);
    const chart = page.locator('#chart-utilization');
    const points = async () => Number((await chart.getAttribute('data-points').catch(() => null)) ?? 0);
    await until('the live run\'s chart', async () => (await page.locator('#exp-detail').getAttribute('data-id')) === id && (await chart.getAttribute('data-series')) === '1', 15_000);
    const first = await until('a first live point', async () => ((await points()) > 0 ? points() : 0), 15_000);
    await until('more live points', async () => (await points()) > first, 15_000);
    await stop(liveRun);
    liveRun = null;
  });

  await check('a failed request shows its message in place, and the page recovers', async () => {
    await page.route('**/api/v1/jobs?**', (r) =>
      r.fulfill({ status: 500, contentType: 'application/json', body: '{"error":"store_error","message":"injected failure"}' }));
    await page.goto(`${base}/#/experiments?status=succeeded`);
    const err = page.locator('.load-error');
    await err.waitFor({ timeout: 10_000 });
    assert(((await err.textContent()) ?? '').includes('injected failure'), `reads "${await err.textContent()}"`);
    await page.unroute('**/api/v1/jobs?**');
    await until('the list back', async () => (await rows.count()) > 0 && (await err.count()) === 0, 15_000);
  });

  await check('a render error in the experiments view shows in place of it (header kept) and "try again" recovers', async () => {
    await page.goto(`${base}/#/`);
    await page.locator('.gpu-card').first().waitFor({ timeout: 10_000 });
    // A browser without ResizeObserver: the run's charts throw while they are built.
    await page.evaluate(() => {
      window.__ro = window.ResizeObserver;
      window.ResizeObserver = undefined;
    });
    await page.evaluate((id) => (location.hash = `#/experiments/${id}`), benchId);
    await until('the error message', async () => (await page.locator('#experiments .render-error').count()) === 1, 10_000);
    const text = (await page.locator('.render-error').textContent()) ?? '';
    assert(/experiments view failed to draw/.test(text), `message "${text}"`);
    assert((await page.locator('header.top #node-name').count()) === 1, 'the header went too');
    assert((await page.locator('nav.views').count()) === 1, 'the view tabs went too');
    await page.evaluate(() => (window.ResizeObserver = window.__ro));
    await page.locator('.render-error button').click();
    await until('the charts after "try again"', async () => (await page.locator('.exp-charts canvas').count()) === 4, 10_000);
    assert((await page.locator('.render-error').count()) === 0, 'the message stayed');
  });

  await check('no errors in the pages', async () => {
    assert(pageErrors.length === 0, pageErrors.join(' | '));
  });
}

suite('experiments pages', { timeoutMs: OVERALL_TIMEOUT_MS, cleanup }, main);
