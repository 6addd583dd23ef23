#!/usr/bin/env node
// Browser test of the dashboard's Cluster view against real agents: three `gpufleet --backend sim serve`
// agents with different simulated loads, and a fourth with --cluster-config listing them. Opens
// `#/cluster` in Debian's Chromium (playwright-core, never a downloaded browser) and compares what the
// page shows with the documents the agent serves (/api/v1/cluster/nodes, /gpus, /select), stops one
// agent mid-test and waits for its node to show as unreachable, and checks that an agent without
// --cluster-config says how to configure one. On node:test (harness.mjs): a TAP report, non-zero exit on
// any failure. Every wait is bounded; every process is stopped.
//
//   GF_BINARY=build/gpufleet node web/tests/cluster.test.mjs      (ctest -R web_cluster)
//   GF_CHROMIUM   browser binary (default /usr/bin/chromium)
//
// The loads (4 GPUs each; idle = utilization < 30 % and memory < 50 % of capacity), as in
// tests/integration/cluster_test.sh:
//   node-a  utilization 10 10 90 90, memory 1 %     → 2 idle
//   node-b  utilization  5  5  5 95, memory 1 %     → 3 idle   (so 2 GPUs → node-b)
//   node-c  utilization  0  0  0  0, memory 60 %    → 0 idle; its name carries markup, which must show as text
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { assert, check, SetupError, sleep, suite, until } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(webDir, '..');
const dist = join(webDir, 'dist');
const binary = resolve(process.env.GF_BINARY ?? join(repo, 'build/gpufleet'));
const chromiumPath = process.env.GF_CHROMIUM ?? '/usr/bin/chromium';
const OVERALL_TIMEOUT_MS = 150_000;
const BUNDLE_LIMIT_GZIP_BYTES = 150 * 1024;
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const SIM_MEMORY_TOTAL_MIB = 81559; // the sim's GPU: 60 % of it is 48936 MiB
const HOSTILE_NAME = 'node-c <img src=x onerror="window.__gfInjected=1">';
const LOADS = {
  a: { name: 'node-a', util: [10, 10, 90, 90], memMib: 800 },
  b: { name: 'node-b', util: [5, 5, 5, 95], memMib: 800 },
  c: { name: HOSTILE_NAME, util: [0, 0, 0, 0], memMib: Math.round(SIM_MEMORY_TOTAL_MIB * 0.6) },
};
// The words the view prints for each health state (src/allocator/node_rank.hpp's names).
const HEALTH_WORDS = { ok: 'ready', not_ready: 'not ready', unschedulable: 'cordoned', agent_unreachable: 'agent unreachable',
  metrics_error: 'metrics error', metrics_stale: 'stale metrics', no_metrics: 'no metrics' };

let browser = null;
let tmp = null;
const procs = []; // { name, child, log }

const json = (x) => JSON.stringify(x);

async function getJson(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: r.status, body: await r.json() };
}

async function stop(p) {
  const { child } = p;
  if (child.exitCode !== null || child.signalCode !== null) return;
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
  await Promise.all(procs.map(stop));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
}

// --- agents ----------------------------------------------------------------------------------------------
/** Starts `gpufleet ARGS… serve SERVE_ARGS…` on a loopback port of its choosing; resolves to its base URL. */
async function startAgent(label, globalArgs, serveArgs) {
  const portFile = join(tmp, `${label}.port`);
  const args = [...globalArgs, 'serve', '--listen', '127.0.0.1:0', '--port-file', portFile, '--db', join(tmp, `${label}.db`),
    '--interval', '1', '--static', dist, ...serveArgs];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  const p = { name: label, child, log: '' };
  procs.push(p);
  const keep = (d) => {
    p.log = (p.log + d).slice(-4000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const spawnError = new Promise((_, rej) => child.once('error', (e) => rej(new SetupError(`cannot start ${binary}: ${e.message}`))));
  spawnError.catch(() => {});
  const port = await Promise.race([
    spawnError,
    until(
      `agent ${label} to write its port`,
      () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new SetupError(`agent ${label} exited (${child.exitCode ?? child.signalCode}) before listening:\n${p.log}`);
        if (!existsSync(portFile)) return null;
        const m = /(\d+)\s*$/.exec(readFileSync(portFile, 'utf8'));
        return m && Number(m[1]) > 0 ? m[1] : null;
      },
      20_000,
    ).catch((e) => {
      throw e instanceof SetupError ? e : new SetupError(`${e.message}\nagent ${label} output:\n${p.log}`);
    }),
  ]);
  const base = `http://127.0.0.1:${port}`;
  await until(`agent ${label} to answer`, async () => (await getJson(`${base}/api/v1/monitoring/gpu-metrics`)).status === 200, 10_000).catch((e) => {
    throw new SetupError(`${e.message}\nagent ${label} output:\n${p.log}`);
  });
  return { base, proc: p };
}

function scenario(load) {
  return { gpus: load.util.map((u) => ({ load: [{ t: 0, utilization: u, memory_used_mib: load.memMib }] })) };
}

/** The link the view must give for an agent URL (see dashboardHref in src/cluster.ts). */
function expectedHref(agentUrl) {
  const u = new URL(agentUrl);
  if (!u.pathname.endsWith('/')) u.pathname += '/';
  return u.href;
}

const fmtPct1 = (v) => (v === null || v === undefined ? 'n/a' : `${v.toFixed(1)} %`);

/** Everything the Cluster view shows per node, read from the DOM. */
function scrapeNodes(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('#cluster-nodes .cluster-node')].map((c) => {
      const a = c.querySelector('a.agent-link');
      return {
        node: c.dataset.node,
        health: c.dataset.health,
        agentUrl: c.dataset.agentUrl,
        name: c.querySelector('.cluster-node-name')?.textContent ?? null,
        healthText: c.querySelector('.node-health')?.textContent ?? null,
        counts: Object.fromEntries([...c.querySelectorAll('.gpu-counts [data-field]')].map((d) => [d.dataset.field, d.querySelector('dd')?.textContent])),
        util: c.querySelector('.avg-util')?.textContent ?? null,
        mem: c.querySelector('.avg-mem')?.textContent ?? null,
        source: c.querySelector('.metrics-source')?.textContent ?? null,
        sources: Object.fromEntries([...c.querySelectorAll('.sources [data-source]')].map((d) => [d.dataset.source, d.querySelector('dd')?.textContent])),
        gpus: [...c.querySelectorAll('.gpu-mini')].map((g) => ({ index: g.dataset.gpuIndex, idle: g.classList.contains('idle'), title: g.getAttribute('title') })),
        link: a ? { href: a.href, target: a.target, rel: a.rel } : null,
        elements: [...c.querySelectorAll('img, script, iframe')].length,
      };
    }),
  );
}

// --- the run ---------------------------------------------------------------------------------------------
async function main() {
  if (!existsSync(join(dist, 'index.html')))
    throw new SetupError(`${dist}/index.html is missing: build the dashboard first (make web, or: cd web && npm ci && npm run build)`);
  if (!existsSync(chromiumPath))
    throw new SetupError(`no browser at ${chromiumPath}: apt-get install -y --no-install-recommends chromium (or set GF_CHROMIUM)`);
  if (!existsSync(binary)) throw new SetupError(`no gpufleet binary at ${binary} (set GF_BINARY)`);
  const require = createRequire(join(webDir, 'package.json'));
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch {
    throw new SetupError('playwright-core is not installed: cd web && npm ci');
  }

  await check(`the bundle is under ${BUNDLE_LIMIT_GZIP_BYTES / 1024} KB gzipped`, async () => {
    const assets = join(dist, 'assets');
    const files = readdirSync(assets).filter((f) => /\.(js|css)$/.test(f));
    assert(files.length > 0, `no .js or .css in ${assets}`);
    const bytes = files.reduce((n, f) => n + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
    console.log(`#    ${files.join(', ')}: ${(bytes / 1024).toFixed(1)} KB gzipped`);
    assert(bytes < BUNDLE_LIMIT_GZIP_BYTES, `${bytes} bytes gzipped`);
  });

  tmp = mkdtempSync(join(tmpdir(), 'gf-web-cluster-'));
  const agents = {};
  for (const [k, load] of Object.entries(LOADS)) {
    const file = join(tmp, `${k}.json`);
    writeFileSync(file, json(scenario(load)));
    agents[k] = await startAgent(k, ['--backend', 'sim', '--sim-scenario', file], ['--node-name', load.name]);
  }
  const config = join(tmp, 'cluster.json');
  writeFileSync(config, json({ agents: Object.values(agents).map((a) => a.base), refresh_interval_s: 1, timeout_s: 2 }));
  const fleet = await startAgent('fleet', ['--backend', 'sim'], ['--node-name', 'fleet', '--cluster-config', config]);
  const base = fleet.base;
  console.log(`# agents: ${Object.values(agents).map((a) => a.base).join(' ')}; fleet view at ${base}`);

  // Wait until the fleet agent sees all three nodes with metrics, so the page never meets 503 cluster_not_ready.
  await until(
    'the fleet view to list three nodes with metrics',
    async () => {
      const { status, body } = await getJson(`${base}/api/v1/cluster/nodes`);
      return status === 200 && body.nodes.length === 3 && body.nodes.every((n) => n.health === 'ok');
    },
    20_000,
    200,
  ).catch((e) => {
    throw new SetupError(`${e.message}\nfleet agent output:\n${fleet.proc.log}`);
  });

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(`console: ${m.text()}`));
  // Name the URL of a failed request (the console line above does not).
  page.on('response', (r) => r.status() >= 400 && pageErrors.push(`HTTP ${r.status()} for ${r.url()}`));

  const resp = await page.goto(`${base}/#/cluster`, { waitUntil: 'load' });

  await check('#/cluster opens the Cluster view, its tab marked current', async () => {
    assert(resp?.status() === 200, `GET / answered ${resp?.status()}`);
    await page.locator('#cluster-nodes .cluster-node').first().waitFor({ timeout: 10_000 });
    assert((await page.locator('#tab-cluster').getAttribute('aria-current')) === 'page', 'the Cluster tab is not current');
    assert((await page.locator('#gpus').count()) === 0, 'the node view is shown too');
  });

  const nodesDoc = (await getJson(`${base}/api/v1/cluster/nodes`)).body;
  const gpusDoc = (await getJson(`${base}/api/v1/cluster/gpus`)).body;

  await check('every node of /api/v1/cluster/nodes is listed with its numbers, health and sources', async () => {
    let shown = [];
    let problem = '';
    const matches = async () => {
      shown = await scrapeNodes(page);
      if (shown.length !== nodesDoc.nodes.length) return !(problem = `${shown.length} cards for ${nodesDoc.nodes.length} nodes`);
      for (const n of nodesDoc.nodes) {
        const s = shown.find((x) => x.node === n.name);
        if (!s) return !(problem = `no card for ${json(n.name)}`);
        const want = {
          name: n.name,
          health: n.health,
          healthText: HEALTH_WORDS[n.health],
          counts: { free_gpus: String(n.free_gpus), idle_gpu_count: String(n.idle_gpu_count), allocatable_gpus: String(n.allocatable_gpus),
            total_gpus: String(n.total_gpus) },
          util: fmtPct1(n.avg_utilization),
          mem: fmtPct1(n.avg_memory_usage),
          source: n.metrics_source ?? 'none',
          sources: n.sources,
        };
        for (const [k, v] of Object.entries(want))
          if (json(s[k]) !== json(v)) return !(problem = `${n.name}: ${k} shows ${json(s[k])}, the document says ${json(v)}`);
      }
      return true;
    };
    await until('the cards to match the document', matches, 10_000, 250).catch((e) => {
      throw new Error(`${problem || e.message}`);
    });
    // The documents are the reference, but they must also be what the scenarios make (so the
    // comparison above is not between two empty things).
    const idle = Object.fromEntries(nodesDoc.nodes.map((n) => [n.name, n.idle_gpu_count]));
    assert(json(idle) === json({ 'node-a': 2, 'node-b': 3, [HOSTILE_NAME]: 0 }), `idle GPUs per node: ${json(idle)}`);
  });
  const shared = { agents, base, page, pageErrors, nodesDoc, gpusDoc };
  await layoutChecks(shared);
  await lifecycleChecks(shared);
}

/** What each node card shows, the select control, and the narrow screen. */
async function layoutChecks({ agents, base, page, nodesDoc, gpusDoc }) {
  await check('markup in a node name shows as text, never as HTML', async () => {
    const shown = await scrapeNodes(page);
    const c = shown.find((x) => x.node === HOSTILE_NAME);
    assert(c?.name === HOSTILE_NAME, `the name reads ${json(c?.name)}`);
    assert(shown.every((x) => x.elements === 0), 'a card contains an img, script or iframe element');
    assert((await page.evaluate(() => window.__gfInjected)) === undefined, 'the injected handler ran');
  });

  await check('each node shows one bar pair per GPU of /api/v1/cluster/gpus, idle ones marked, exact values in the tooltip', async () => {
    const shown = await scrapeNodes(page);
    for (const n of nodesDoc.nodes) {
      const docGpus = gpusDoc.gpus.filter((g) => g.node === n.name).sort((a, b) => a.index - b.index);
      const s = shown.find((x) => x.node === n.name);
      assert(docGpus.length === 4, `${n.name}: the document has ${docGpus.length} GPUs, the scenario 4`);
      assert(s.gpus.length === docGpus.length, `${n.name}: ${s.gpus.length} bars for ${docGpus.length} GPUs`);
      docGpus.forEach((g, i) => {
        const bar = s.gpus[i];
        assert(bar.index === String(g.index), `${n.name}: bar ${i} is GPU ${bar.index}, expected ${g.index}`);
        assert(bar.idle === g.idle, `${n.name} GPU ${g.index}: idle mark ${bar.idle}, the document says ${g.idle}`);
        assert(bar.title.includes(`utilization ${g.utilization} %`), `${n.name} GPU ${g.index}: tooltip ${json(bar.title)} lacks utilization ${g.utilization}`);
        assert(bar.title.includes(`(${fmtPct1(g.memory_usage)})`), `${n.name} GPU ${g.index}: tooltip ${json(bar.title)} lacks memory ${g.memory_usage}`);
      });
      assert(s.gpus.filter((g) => g.idle).length === n.idle_gpu_count, `${n.name}: idle marks differ from idle_gpu_count ${n.idle_gpu_count}`);
    }
  });

  await check("each node links to its agent's dashboard (http only, new tab, noopener)", async () => {
    const shown = await scrapeNodes(page);
    const ours = new Set(Object.values(agents).map((a) => a.base));
    for (const n of nodesDoc.nodes) {
      const s = shown.find((x) => x.node === n.name);
      assert(ours.has(n.agent_url), `${n.name}: agent_url ${n.agent_url} is none of ours`);
      assert(s.link, `${n.name}: no link`);
      assert(s.link.href === expectedHref(n.agent_url), `${n.name}: href ${s.link.href}, expected ${expectedHref(n.agent_url)}`);
      assert(s.link.target === '_blank', `${n.name}: target ${json(s.link.target)}`);
      assert(s.link.rel.split(/\s+/).includes('noopener'), `${n.name}: rel ${json(s.link.rel)}`);
    }
  });

  const askSelect = async (gpus, fallback) => {
    await page.fill('#select-gpus', String(gpus));
    await page.selectOption('#select-fallback', fallback);
    const before = await page.locator('#select-result').getAttribute('data-asked').catch(() => null);
    await page.click('#select-ask');
    await until('an answer to the select control', async () => {
      const now = await page.locator('#select-result').getAttribute('data-asked', { timeout: 1000 });
      return now !== null && now !== before;
    }, 10_000);
    const ref = (await getJson(`${base}/api/v1/cluster/select?gpus=${gpus}&fallback=${fallback}`)).body;
    return {
      ref,
      node: await page.locator('#select-result').getAttribute('data-node'),
      reason: await page.locator('#select-result .select-reason').textContent(),
      reasoning: await page.locator('#select-result .reasoning').textContent(),
    };
  };

  await check('the select control answers what /api/v1/cluster/select?gpus=2 answers, with its reasoning', async () => {
    const got = await askSelect(2, 'none');
    assert(got.ref.node === 'node-b', `the API chose ${json(got.ref.node)}; the scenarios make node-b the answer`);
    assert(got.node === got.ref.node, `the page says ${json(got.node)}, the API ${json(got.ref.node)}`);
    assert(got.reasoning === got.ref.reasoning.join('\n'), `reasoning differs: ${json(got.reasoning)}`);
    assert(got.reason === got.ref.reason, `reason differs: ${json(got.reason)}`);
    const chosen = await page.locator('.cluster-node.chosen').getAttribute('data-node');
    assert(chosen === 'node-b', `the card marked chosen is ${json(chosen)}`);
  });

  await check('for 4 GPUs the control says no node qualifies and why, as the API does', async () => {
    const got = await askSelect(4, 'none');
    assert(got.ref.node === null, `the API chose ${json(got.ref.node)}`);
    assert(got.node === '', `the page names node ${json(got.node)}`);
    assert((await page.locator('#select-none').count()) === 1, 'no "no node qualifies" line');
    assert(got.reason === got.ref.reason && got.reason.includes('no node has 4 idle GPU(s)'), `reason ${json(got.reason)}`);
  });

  await check('readable at 375 px: no horizontal scrolling', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await sleep(200);
    const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    await page.setViewportSize({ width: 1400, height: 1000 });
    assert(scroll <= client, `the page is ${scroll} px wide in a ${client} px viewport`);
  });
}

/** An agent stopped mid-test, the tabs, and an agent without a fleet. */
async function lifecycleChecks({ agents, base, page, pageErrors }) {
  await check('an agent stopped mid-test shows as unreachable after a refresh', async () => {
    const url = agents.c.base;
    await stop(agents.c.proc);
    const card = await until(
      'the stopped agent to show as unreachable',
      async () => (await scrapeNodes(page)).find((x) => x.agentUrl === url && x.health === 'agent_unreachable'),
      30_000,
      250,
    );
    const doc = (await getJson(`${base}/api/v1/cluster/nodes`)).body;
    const n = doc.nodes.find((x) => x.agent_url === url);
    assert(n?.health === 'agent_unreachable', `the document says ${json(n?.health)} for ${url}`);
    assert(card.healthText === 'agent unreachable', `the badge reads ${json(card.healthText)}`);
    assert(card.gpus.length === 0, `${card.gpus.length} GPU bars for an unreachable node`);
    assert(card.link?.href === expectedHref(url), 'the unreachable node lost its agent link');
    const live = (await scrapeNodes(page)).filter((x) => x.health === 'ok').map((x) => x.node);
    assert(json(live) === json(['node-a', 'node-b']), `nodes still ok: ${json(live)}`);
  });

  await check('the Cluster tab leads back to the node view and returns', async () => {
    await page.click('#tab-node');
    await page.locator('#gpus').waitFor({ timeout: 5000 });
    await page.click('#tab-cluster');
    await page.locator('#cluster-nodes .cluster-node').first().waitFor({ timeout: 10_000 });
  });

  await check('no errors in the page', async () => {
    assert(pageErrors.length === 0, pageErrors.join(' | '));
  });

  await check('an agent without --cluster-config offers the tab and says how to enable the fleet view', async () => {
    const other = await browser.newPage({ viewport: { width: 1000, height: 800 } });
    const errors = [];
    other.on('pageerror', (e) => errors.push(e.message));
    other.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await other.goto(`${agents.a.base}/`, { waitUntil: 'load' });
    await other.locator('#tab-cluster').waitFor({ timeout: 10_000 });
    await other.click('#tab-cluster');
    const box = other.locator('#cluster-not-configured');
    await box.waitFor({ timeout: 10_000 });
    const text = await box.innerText();
    assert(text.includes('--cluster-config'), `the message reads ${json(text)}`);
    assert((await other.locator('#cluster-error, #cluster-nodes').count()) === 0, 'an error or a node list shows as well');
    // The agent's 503 for the fleet routes is logged by the browser itself; nothing else may be.
    const unexpected = errors.filter((e) => !/status of 503/.test(e));
    assert(unexpected.length === 0, unexpected.join(' | '));
    await other.close();
  });
}

const agentOutput = () => {
  for (const p of procs) if (p.log) console.log(`---- ${p.name} (last output)\n${p.log.slice(-1500)}`);
};
suite('cluster view', { timeoutMs: OVERALL_TIMEOUT_MS, cleanup, onFailure: agentOutput }, main);
