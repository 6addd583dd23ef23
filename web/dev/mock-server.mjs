#!/usr/bin/env node
// A stand-in for `gpufleet serve`, for working on the dashboard without the agent. Node built-ins only.
// It serves the API contract from the sim backend's real document (`gpufleet --backend sim status --json`,
// run once per second), the real field table (`gpufleet fields --json`, read once: the same document the
// agent serves at /api/v1/fields, so the mock cannot drift from it) and web/dist as static files, with a
// small WebSocket server of its own. The job record is made up (a running job, task grids, a run without
// monitoring data and one without GPUs) and served like the agent's: a paged, filtered /api/v1/jobs,
// /api/v1/jobs/{id} (and its alias /api/v1/experiments/{id}) and /api/v1/tasks, for the experiments pages.
//
//   node dev/mock-server.mjs [--port 9401] [--host 127.0.0.1] [--static dist] [--binary ../build/gpufleet]
//   MOCK_LOST=1   report the last GPU as lost (null readings), to see how the UI marks it
//   MOCK_ALERTS=1 fire and resolve a high_temperature_alert every 20 s
//   MOCK_NO_CLUSTER=1 answer the fleet routes with 503 cluster_not_configured, like an agent without
//                 --cluster-config (otherwise they serve a small made-up fleet around this node)
//
// With `npm run dev` (Vite on :5173) the API is proxied here; or build and open http://127.0.0.1:9401/.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { dirname, extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
  options: {
    port: { type: 'string', default: '9401' },
    host: { type: 'string', default: '127.0.0.1' },
    static: { type: 'string', default: resolve(here, '../dist') },
    binary: { type: 'string', default: process.env.GF_BINARY ?? resolve(here, '../../build/gpufleet') },
  },
});
const staticRoot = resolve(opt.static);
const WINDOW_MS = 60 * 60 * 1000; // the live charts' hour

// --- the document ------------------------------------------------------------------------------------
let doc = null; // latest snapshot document
const samples = []; // { t, gpus: [{ index, utilization, memory_used, ... }] } for /api/v1/history

function sample() {
  return new Promise((res) => {
    execFile(opt.binary, ['--backend', 'sim', 'status', '--json'], { timeout: 5000 }, (err, stdout) => {
      if (err) {
        console.error(`mock: ${opt.binary} failed: ${err.message}`);
        return res(null);
      }
      const d = JSON.parse(stdout);
      d.node = `${hostname()} (mock)`;
      d.timestamp = new Date().toISOString(); // the sim's clock may be a scenario clock
      if (process.env.MOCK_LOST && d.gpus.length) {
        const g = d.gpus[d.gpus.length - 1];
        Object.assign(g, { health: 'lost', health_message: 'GPU has fallen off the bus', utilization: null, temperature: null,
          power_usage: null, fan_speed: null, memory_utilization: null, processes: [] });
        g.memory.used = null;
        g.missing_reasons = { ...g.missing_reasons, utilization: 'gpu_lost', temperature: 'gpu_lost', power_usage: 'gpu_lost',
          fan_speed: 'gpu_lost', memory_utilization: 'gpu_lost', 'memory.used': 'gpu_lost' };
      }
      res(d);
    });
  });
}

// The field table, from the binary: history metric name → how to read it from a GPU object, and its unit.
function loadFields() {
  return new Promise((res) => {
    execFile(opt.binary, ['fields', '--json'], { timeout: 5000 }, (err, stdout) => {
      if (err) {
        console.error(`mock: ${opt.binary} fields --json failed: ${err.message}`);
        return res(null);
      }
      res(JSON.parse(stdout));
    });
  });
}
const fieldsDoc = await loadFields();
if (!fieldsDoc) process.exit(1);
const at = (g, key) => key.split('.').reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), g);
const metricOf = {};
const units = {};
for (const f of fieldsDoc.fields) {
  if (!f.history_metric) continue;
  metricOf[f.history_metric] = (g) => at(g, f.key);
  units[f.history_metric] = f.unit;
}

function record(d) {
  const t = Date.parse(d.timestamp);
  samples.push({ t, gpus: d.gpus });
  while (samples.length && samples[0].t < t - 2 * WINDOW_MS) samples.shift();
}

// 15 minutes of made-up past around the first document, so the charts have a history to seed from.
function prefill(d) {
  const now = Date.parse(d.timestamp);
  for (let t = now - WINDOW_MS; t < now - 1000; t += 5000) {
    const wobble = (x, amp) => (typeof x === 'number' ? Math.max(0, x + (Math.random() - 0.5) * amp) : x);
    samples.push({
      t,
      gpus: d.gpus.map((g) => ({ ...g, utilization: Math.min(100, wobble(g.utilization, 20)), temperature: wobble(g.temperature, 4),
        power_usage: wobble(g.power_usage, 60), memory: { ...g.memory, used: wobble(g.memory?.used, 2000) } })),
    });
  }
}

function parseSince(s, now) {
  if (!s) return now - WINDOW_MS;
  const m = /^(\d+(?:\.\d+)?)([smhd])$/.exec(s);
  if (m) return now - Number(m[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[m[2]] ;
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : t;
}

function history(q) {
  const metric = q.get('metric') ?? 'utilization';
  if (!metricOf[metric]) return [400, { error: 'bad_request', message: `unknown metric ${metric}` }];
  const now = Date.now();
  const since = parseSince(q.get('since'), now);
  const until = q.has('until') ? parseSince(q.get('until'), now) : now;
  if (since === null || until === null) return [400, { error: 'bad_request', message: 'bad since/until' }];
  const step = Number(q.get('step')) || Math.max(1, Math.ceil((until - since) / 1000 / 500));
  const gpuFilter = q.has('gpu') ? Number(q.get('gpu')) : null;
  const buckets = new Map(); // gpu → Map(bucketStart → values[])
  for (const s of samples) {
    if (s.t < since || s.t > until) continue;
    const b = Math.floor(s.t / 1000 / step) * step * 1000;
    for (const g of s.gpus) {
      if (gpuFilter !== null && g.index !== gpuFilter) continue;
      if (!buckets.has(g.index)) buckets.set(g.index, new Map());
      const m = buckets.get(g.index);
      if (!m.has(b)) m.set(b, []);
      m.get(b).push(metricOf[metric](g));
    }
  }
  const series = [...buckets].sort((a, b) => a[0] - b[0]).map(([gpu, m]) => ({
    gpu,
    points: [...m].map(([t, vs]) => {
      const nums = vs.filter((v) => typeof v === 'number');
      return nums.length
        ? { t, avg: nums.reduce((a, b) => a + b, 0) / nums.length, min: Math.min(...nums), max: Math.max(...nums), samples: nums.length }
        : { t, avg: null, min: null, max: null, samples: 0 };
    }),
  }));
  return [200, { metric, unit: units[metric], since: new Date(since).toISOString(), until: new Date(until).toISOString(), step_s: step, series }];
}

// --- alerts, leases, jobs ------------------------------------------------------------------------------
const firing = new Map();
const recent = [];
let alertSeq = 0;
function toggleAlert() {
  const g = doc?.gpus?.[0];
  if (!g) return null;
  const now = new Date().toISOString();
  let a = [...firing.values()][0];
  if (a) {
    firing.delete(a.id);
    a = { ...a, state: 'resolved', resolved_at: now, at: now, message: `temperature back to ${g.temperature} °C` };
  } else {
    a = { id: `a${++alertSeq}`, kind: 'high_temperature_alert', gpu_index: g.index, gpu_uuid: g.uuid, severity: 'critical',
      message: `GPU ${g.index} at ${g.temperature} °C (threshold 70 °C)`, value: g.temperature, threshold: 70,
      state: 'firing', started_at: now, resolved_at: null, at: now };
    firing.set(a.id, a);
  }
  recent.unshift(a);
  recent.length = Math.min(recent.length, 100);
  return a;
}

const started = Date.now();
const leases = () => ({
  leases: [{ id: 'l-7f3a', name: 'train-llama', job_id: 'j-0042', gpus: [{ index: 0, uuid: doc?.gpus?.[0]?.uuid ?? null }],
    owner: { pid: 31337, user: 'alice' }, created_at: new Date(started - 3600e3).toISOString(), released_at: null }],
});

// The job record (GET /api/v1/jobs, /api/v1/jobs/{id}, /api/v1/tasks), shaped like the agent's: the seed's
// record (gpu_info, metrics.gpu_monitoring with its statistics and samples) plus the row's columns. Made up
// once: a running job, a task grid of 14 runs, another user's task, a run without monitoring data and one
// without GPUs, so every case of the experiments pages shows.
const MODEL = 'Simulated H100 80GB HBM3';
const iso = (ms) => new Date(ms).toISOString();
function monitoring(gpus, startMs, seconds, base) {
  const n = Math.max(2, Math.min(120, Math.round(seconds)));
  const gpu_stats = {};
  const series = {};
  const stat = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return { mean: xs.reduce((a, b) => a + b, 0) / xs.length, min: s[0], max: s[s.length - 1], p95: s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)] };
  };
  for (const g of gpus) {
    const t = Array.from({ length: n }, (_, i) => (i * seconds) / (n - 1));
    const util = t.map((_, i) => Math.round(Math.max(0, Math.min(100, base + 25 * Math.sin(i / 7 + g)))));
    const mem = util.map((u) => Math.round(20000 + u * 500));
    const temp = util.map((u) => Math.round(40 + u / 3));
    const power = util.map((u) => Math.round((80 + u * 3) * 10) / 10);
    series[g] = { t, utilization: util, memory_used_mb: mem, temperature_c: temp, power_draw_w: power };
    gpu_stats[g] = { name: MODEL, uuid: `GPU-mock-${g}`, sample_count: n, utilization: stat(util), memory_used_mb: stat(mem),
      memory_usage_percent: stat(mem.map((m) => (m / 81559) * 100)), temperature_c: stat(temp), power_draw_w: stat(power),
      energy_joules: stat(power).mean * seconds };
  }
  // The sampler starts after the launch and stops at the exit: the monitored time is a little shorter.
  return { sample_count: n * gpus.length, monitoring_duration_seconds: Math.max(0, seconds - 0.4), gpu_stats, series, start_ms: startMs };
}
function jobRecord({ id, name, task = null, user = 'alice', uid = 1000, status, exit, startMs, seconds, gpus, command, base = 60, mon = true }) {
  const endMs = seconds === null ? null : startMs + seconds * 1000;
  const rec = { id, name, task, user, uid, status, exit_code: exit ?? null, command, started_at: iso(startMs), ended_at: endMs === null ? null : iso(endMs),
    duration_seconds: seconds, lease_id: gpus.length ? `l-${id}` : undefined };
  if (gpus.length)
    rec.gpu_info = { model: MODEL, count: gpus.length, device_ids: gpus.map(String), world_size: 1,
      gpu_info: { count: gpus.length, indices: gpus, allocation_method: 'most_available', why: `the ${gpus.length} most available GPUs` } };
  else rec.error = 'not enough GPUs';
  if (mon && gpus.length && seconds !== null) {
    const { start_ms: _s, ...m } = monitoring(gpus, startMs, seconds, base);
    rec.metrics = { gpu_monitoring: m };
  }
  return rec;
}
const jobRecords = [
  jobRecord({ id: 'j-0042', name: 'train-llama', status: 'running', startMs: started - 3600e3, seconds: null, gpus: [0],
    command: ['python3', 'train.py', '--model', 'llama-3-8b'] }),
  ...Array.from({ length: 14 }, (_, i) =>
    jobRecord({ id: `j-${String(41 - i).padStart(4, '0')}`, name: `sweep [lr=${(i + 1) * 1e-4}]`, task: 'sweep', status: i % 5 === 3 ? 'failed' : 'succeeded',
      exit: i % 5 === 3 ? 1 : 0, startMs: started - 7200e3 - i * 600e3, seconds: 300 + i * 10, gpus: [i % 4], base: 40 + i * 3,
      command: ['python3', 'train.py', `--lr=${(i + 1) * 1e-4}`] })),
  ...Array.from({ length: 3 }, (_, i) =>
    jobRecord({ id: `j-${String(27 - i).padStart(4, '0')}`, name: `eval ${i}`, task: 'eval', user: 'bob', uid: 1001, status: 'succeeded', exit: 0,
      startMs: started - 20000e3 - i * 900e3, seconds: 120, gpus: [1, 2], base: 20, command: ['python3', 'eval.py', `--shard=${i}`] })),
  jobRecord({ id: 'j-0024', name: 'smoke', status: 'succeeded', exit: 0, startMs: started - 30000e3, seconds: 2, gpus: [3], mon: false, command: ['true'] }),
  jobRecord({ id: 'j-0023', name: 'too-big', status: 'no_gpus', startMs: started - 31000e3, seconds: 0, gpus: [], command: ['python3', 'big.py'] }),
];
const byNewest = () => [...jobRecords].sort((a, b) => Date.parse(b.started_at) - Date.parse(a.started_at));
/** A running job's duration and GPU-hours count up to now, as the agent's do. */
const withNow = (j) => (j.status === 'running' ? { ...j, duration_seconds: null } : j);

function pageOf(q, defaultLimit) {
  const limit = q.has('limit') ? Number(q.get('limit')) : defaultLimit;
  const offset = q.has('offset') ? Number(q.get('offset')) : 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return { error: 'query parameter limit must be an integer in [1, 1000]' };
  if (!Number.isInteger(offset) || offset < 0) return { error: 'query parameter offset must be a non-negative integer' };
  return { limit, offset };
}
const ownerMatches = (j, q) => (!q.get('user') || j.user === q.get('user')) && (!q.get('uid') || String(j.uid) === q.get('uid'));

function jobsRoute(q) {
  const p = pageOf(q, 200);
  if (p.error) return [400, { error: 'invalid', message: p.error }];
  const status = q.get('status');
  const list = byNewest().filter((j) => (!status || j.status === status) && (!q.get('task') || j.task === q.get('task')) && ownerMatches(j, q));
  const series = q.get('series') !== 'false' && q.get('series') !== '0';
  const jobs = list.slice(p.offset, p.offset + p.limit).map((j) => {
    const out = withNow(j);
    if (series || !out.metrics) return out;
    const { series: _drop, ...mon } = out.metrics.gpu_monitoring;
    return { ...out, metrics: { gpu_monitoring: { ...mon, has_series: true } } };
  });
  return [200, { node: doc?.node ?? null, jobs, total: list.length, limit: p.limit, offset: p.offset }];
}

function tasksRoute(q) {
  const p = pageOf(q, 100);
  if (p.error) return [400, { error: 'invalid', message: p.error }];
  const groups = new Map();
  for (const j of byNewest()) {
    if (!j.task || !ownerMatches(j, q) || (q.get('task') && j.task !== q.get('task'))) continue;
    const k = `${j.task}\u0000${j.uid}\u0000${j.user}`;
    const t = groups.get(k) ?? { task: j.task, user: j.user, uid: j.uid, runs: 0, succeeded: 0, failed: 0, running: 0, gpu_hours: 0, last_started_at: j.started_at };
    t.runs++;
    if (j.status === 'succeeded' || j.status === 'failed' || j.status === 'running') t[j.status]++;
    const end = j.ended_at ? Date.parse(j.ended_at) : Date.now();
    t.gpu_hours += ((j.gpu_info?.count ?? 0) * (end - Date.parse(j.started_at))) / 3.6e6;
    groups.set(k, t);
  }
  const tasks = [...groups.values()].map((t) => ({ ...t, gpu_hours: Math.round(t.gpu_hours * 1e4) / 1e4 }));
  return [200, { node: doc?.node ?? null, tasks: tasks.slice(p.offset, p.offset + p.limit), total: tasks.length, limit: p.limit, offset: p.offset }];
}

function oneJob(id) {
  const j = jobRecords.find((x) => x.id === id);
  return j ? [200, withNow(j)] : [404, { error: 'not_found', message: `no job ${id} (see GET /api/v1/jobs)` }];
}

/** The history route's time syntax: epoch seconds, ISO 8601, or a duration before now (90s, 15m, 6h, 7d). */
function parseWhen(text, now) {
  const d = /^(\d+)(s|m|h|d)$/.exec(text);
  if (d) return now - Number(d[1]) * { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[d[2]];
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : t;
}

/** GET /api/v1/alerts with the agent's filters: gpu, since, until (episodes that overlap the range), limit. */
function alertsRoute(q) {
  const now = Date.now();
  const since = q.has('since') ? parseWhen(q.get('since'), now) : -Infinity;
  const until = q.has('until') ? parseWhen(q.get('until'), now) : Infinity;
  if (since === null || until === null) return [400, { error: 'invalid', message: 'since/until: epoch seconds, ISO 8601 or a duration (15m)' }];
  if (until <= since) return [400, { error: 'invalid', message: 'until must be after since' }];
  const gpu = q.has('gpu') ? Number(q.get('gpu')) : null;
  const limit = q.has('limit') ? Number(q.get('limit')) : 100;
  const match = (a) =>
    (gpu === null || a.gpu_index === gpu) && Date.parse(a.started_at) < until && (a.resolved_at === null || Date.parse(a.resolved_at) >= since);
  return [200, { firing: [...firing.values()].filter(match), recent: recent.filter(match).slice(0, limit), rules: [] }];
}

function summary() {
  const gs = doc?.gpus ?? [];
  const nums = (f) => gs.map(f).filter((v) => typeof v === 'number');
  const avg = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
  const busiest = gs.reduce((b, g) => (g.utilization ?? -1) > (b?.utilization ?? -1) ? g : b, null);
  return { timestamp: doc?.timestamp, node: doc?.node, backend: doc?.backend, simulated: doc?.simulated === true, gpu_count: gs.length,
    // The agent's rule (src/core/policy.hpp): a GPU that reports its utilization is available at ≤ 50 %, busy
    // above; a lost one is neither.
    available_gpus: gs.filter((g) => g.health === 'ok' && typeof g.utilization === 'number' && g.utilization <= 50).length,
    busy_gpus: gs.filter((g) => g.health === 'ok' && typeof g.utilization === 'number' && g.utilization > 50).length,
    lost_gpus: gs.filter((g) => g.health !== 'ok').length,
    memory: { total: nums((g) => g.memory?.total).reduce((a, b) => a + b, 0), used: nums((g) => g.memory?.used).reduce((a, b) => a + b, 0),
      free: nums((g) => g.memory?.free).reduce((a, b) => a + b, 0) },
    utilization_avg: avg(nums((g) => g.utilization)), temperature_avg: avg(nums((g) => g.temperature)),
    temperature_max: nums((g) => g.temperature).length ? Math.max(...nums((g) => g.temperature)) : null,
    power_total: nums((g) => g.power_usage).reduce((a, b) => a + b, 0),
    busiest_gpu: busiest ? { index: busiest.index, name: busiest.name, utilization: busiest.utilization } : null,
    process_count: gs.reduce((n, g) => n + (g.processes?.length ?? 0), 0), alerts_firing: firing.size };
}

// --- the fleet (/api/v1/cluster/*) ----------------------------------------------------------------------
// This node (its real sim GPUs) plus three made-up ones: a busy Prometheus-only node, a cordoned node and
// an unreachable agent, so every state of the Cluster view shows. The rules are the agent's
// (src/allocator/node_rank.hpp), simplified: idle = utilization < 30 % and memory < 50 % of capacity.
const IDLE = { utilization: 30, memory: 50 };
let selfUrl = 'http://127.0.0.1:9401';
const round1 = (v) => (v === null ? null : Math.round(v * 10) / 10);
const madeUp = (node, utils, usedMib) =>
  utils.map((u, i) => ({ index: i, name: 'Simulated A100 80GB', uuid: `GPU-${node}-${i}`, utilization: u, temperature: 40 + u / 3,
    power_usage: 60 + u * 3, memory: { total: 81920, used: usedMib[i % usedMib.length] } }));

function fleetFacts() {
  const t = Date.now() / 20000;
  const wobble = (u, k) => Math.max(0, Math.min(100, Math.round(u + 8 * Math.sin(t + k))));
  return [
    { name: doc?.node ?? 'this-node', source: 'agent', agentUrl: selfUrl, schedulable: true, gpus: doc?.gpus ?? [], observed: doc?.timestamp },
    { name: 'gpu-b', source: 'prometheus', agentUrl: null, schedulable: true, observed: new Date().toISOString(),
      gpus: madeUp('gpu-b', [5, 12, 97, 99, 88, 3, 0, 64].map(wobble), [900, 70000, 41000]) },
    { name: 'gpu-c', source: 'prometheus', agentUrl: null, schedulable: false, observed: new Date().toISOString(),
      gpus: madeUp('gpu-c', [0, 0, 2, 1], [500]) },
    { name: 'gpu-d', source: 'agent', agentUrl: 'http://gpu-d.example:9401', schedulable: true, gpus: null,
      error: 'http://gpu-d.example:9401: cannot connect: Connection refused' },
  ];
}

function fleetGpus(f) {
  return (f.gpus ?? []).map((g) => {
    const used = g.memory?.used ?? null;
    const total = g.memory?.total ?? null;
    const usage = used !== null && total ? (used / total) * 100 : null;
    const util = g.utilization ?? null;
    return { node: f.name, index: g.index, uuid: g.uuid ?? null, model: g.name ?? null, utilization: util, memory_used_mib: used,
      memory_total_mib: total, memory_usage: round1(usage), temperature: g.temperature ?? null, power_w: g.power_usage ?? null,
      idle: util !== null && usage !== null && util < IDLE.utilization && usage < IDLE.memory, source: f.source };
  });
}

function fleetNodes() {
  return fleetFacts().map((f) => {
    const gpus = fleetGpus(f).filter((g) => g.utilization !== null && g.memory_usage !== null);
    const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
    const has = f.gpus !== null && gpus.length > 0;
    const n = f.gpus?.length ?? 0;
    const problems = [];
    if (!f.schedulable) problems.push('unschedulable (cordoned)');
    if (f.error) problems.push(`agent unreachable: ${f.error}`);
    return { name: f.name, total_gpus: n, allocatable_gpus: n, requested_gpus: 0, free_gpus: n,
      idle_gpu_count: has ? gpus.filter((g) => g.idle).length : n, gpus_with_metrics: gpus.length,
      avg_utilization: round1(mean(gpus.map((g) => g.utilization))), avg_memory_usage: round1(mean(gpus.map((g) => g.memory_usage))),
      avg_temperature: round1(mean(gpus.map((g) => g.temperature).filter((v) => v !== null))),
      total_power_w: round1(gpus.reduce((a, g) => a + (g.power_w ?? 0), 0)),
      health: f.error ? 'agent_unreachable' : !f.schedulable ? 'unschedulable' : 'ok', problems, ready: true, schedulable: f.schedulable,
      in_kubernetes: false, has_metrics: has, gpu_resource: null, gpu_product: f.gpus?.[0]?.name ?? null, metrics_source: f.source,
      agent_url: f.agentUrl, observed: f.observed ?? null,
      sources: { total_gpus: 'metrics: GPUs seen (no Kubernetes)', allocatable_gpus: '= total (no Kubernetes)',
        requested_gpus: 'none known (no Kubernetes)', free_gpus: '= total (no Kubernetes)',
        idle_gpu_count: has ? `${f.source}: utilization and memory under the thresholds` : 'assumed: no metrics, free GPUs counted idle',
        utilization: has ? f.source : 'none' } };
  });
}

const fleetCommon = () => ({ thresholds: { utilization: IDLE.utilization, memory: IDLE.memory }, max_age_s: 60,
  sources: ['prometheus http://prometheus.example:9090', '2 agent(s)'], kubernetes: false,
  errors: ['agent http://gpu-d.example:9401: cannot connect: Connection refused'], collected: new Date().toISOString() });

function fleetSelect(q) {
  const raw = q.get('gpus') ?? '1';
  const need = Number(raw);
  if (!/^\d+$/.test(raw) || need < 1 || need > 4096) return [400, { error: 'bad_request', message: 'gpus must be an integer from 1 to 4096' }];
  const fallback = q.get('fallback') ?? 'none';
  if (!['none', 'least-loaded', 'least_loaded'].includes(fallback)) return [400, { error: 'bad_request', message: 'fallback must be none or least-loaded' }];
  const nodes = fleetNodes();
  const eligible = nodes.filter((n) => n.ready && n.schedulable && n.free_gpus >= need).sort((a, b) =>
    (b.idle_gpu_count >= need) - (a.idle_gpu_count >= need) || b.idle_gpu_count - a.idle_gpu_count ||
    (a.avg_utilization ?? 0) - (b.avg_utilization ?? 0) || a.free_gpus - b.free_gpus || a.name.localeCompare(b.name));
  const whyNot = (n) => [!n.schedulable && 'unschedulable (cordoned)', n.free_gpus < need && `${n.free_gpus} free GPU(s) < ${need}`].filter(Boolean).join('; ');
  const others = nodes.filter((n) => !eligible.includes(n));
  let node = null;
  let reason;
  let fallbackUsed = false;
  const best = eligible[0];
  if (best && best.idle_gpu_count >= need) {
    node = best.name;
    reason = `node '${node}' has ${best.idle_gpu_count} idle GPU(s) (${need} needed) and average utilization ${best.avg_utilization}%`;
  } else if (!best) {
    reason = `no node can host ${need} GPU(s) (Ready, schedulable, enough free GPUs)`;
  } else if (fallback !== 'none') {
    const least = [...eligible].sort((a, b) => (a.avg_utilization ?? 0) - (b.avg_utilization ?? 0))[0];
    node = least.name;
    fallbackUsed = true;
    reason = `no node has ${need} idle GPU(s); least-loaded node with ${need} free GPU(s): '${node}'`;
  } else {
    reason = `no node has ${need} idle GPU(s) (the most: '${best.name}' with ${best.idle_gpu_count} idle of ${best.free_gpus} free); not pinned`;
  }
  const chosen = nodes.find((n) => n.name === node);
  const reasoning = ['=== GPU Node Selection ===', `Looking for node with ${need} idle GPU(s)...`,
    ...(chosen ? [`Selected node '${node}' for deployment:`, `  - Allocatable GPUs: ${chosen.allocatable_gpus}/${chosen.total_gpus}`,
      `  - Free GPUs: ${chosen.free_gpus} (0 requested)`, `  - Idle GPUs: ${chosen.idle_gpu_count}`,
      `  - Avg Utilization: ${chosen.avg_utilization?.toFixed(1)}%`, `  - Avg Memory Usage: ${chosen.avg_memory_usage?.toFixed(1)}%`,
      `\u2713 Selected node: ${node}`] : [`No suitable node found: ${reason}`, 'No node pinned: the Kubernetes scheduler decides.']),
    '=========================='];
  let rank = 0;
  const candidates = [...eligible, ...others].map((n) => ({ node: n.name, rank: eligible.includes(n) ? ++rank : null,
    eligible: eligible.includes(n), enough_idle: n.idle_gpu_count >= need, why_not: eligible.includes(n) ? null : whyNot(n),
    idle_gpu_count: n.idle_gpu_count, free_gpus: n.free_gpus, allocatable_gpus: n.allocatable_gpus, total_gpus: n.total_gpus,
    avg_utilization: n.avg_utilization, avg_memory_usage: n.avg_memory_usage, health: n.health }));
  return [200, { ...fleetCommon(), node, reason, required_gpus: need, fallback: fallback === 'none' ? 'none' : 'least-loaded',
    fallback_used: fallbackUsed, reasoning, candidates }];
}

function fleetRoute(fn) {
  if (process.env.MOCK_NO_CLUSTER)
    return [503, { error: 'cluster_not_configured', message: 'this agent has no fleet view: start it with --cluster-config FILE' }];
  return fn();
}

// --- HTTP ----------------------------------------------------------------------------------------------
const mime = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json' };

function sendJson(res, status, body) {
  const s = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(s);
}

const server = createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  const routes = {
    '/api/v1/monitoring/gpu-metrics': () => (doc ? [200, doc] : [503, { error: 'unavailable', message: 'no sample yet' }]),
    '/api/gpu/summary': () => [200, summary()],
    '/api/v1/history': () => history(u.searchParams),
    '/api/v1/alerts': () => alertsRoute(u.searchParams),
    '/api/v1/leases': () => [200, leases()],
    '/api/v1/jobs': () => jobsRoute(u.searchParams),
    // Submission is off here, as on an agent without "jobs": {"submit": true}.
    '/api/v1/session': () => [200, { writer: false, jobs_submit: false }],
    '/api/v1/tasks': () => tasksRoute(u.searchParams),
    // The agent's health in its shape: gpu_monitoring is the home monitor's word, the detail is monitoring.
    '/api/health': () => [200, {
      status: 'ok', service: 'gpufleet', version: 'mock', database: 'connected', problems: [],
      gpu_monitoring: doc ? 'available' : 'unavailable', backend: doc?.backend ?? null,
      monitoring: { available: !!doc, gpu_count: doc?.gpus?.length ?? 0, last_error: null, backend: doc?.backend ?? 'none', stale: false, age_s: doc ? 0 : null },
    }],
    '/api/v1/fields': () => [200, fieldsDoc],
    '/api/openapi.json': () => [200, { openapi: '3.0.3', paths: { '/api/v1/cluster/nodes': {}, '/api/v1/cluster/gpus': {}, '/api/v1/cluster/select': {} } }],
    '/api/v1/cluster/nodes': () => fleetRoute(() => [200, { ...fleetCommon(), nodes: fleetNodes(), unknown_nodes: [] }]),
    '/api/v1/cluster/gpus': () =>
      fleetRoute(() => {
        const facts = fleetFacts();
        return [200, { ...fleetCommon(), gpus: facts.flatMap(fleetGpus),
          nodes_without_metrics: fleetNodes().filter((n) => !n.has_metrics).map((n) => ({ node: n.name, health: n.health, problems: n.problems })) }];
      }),
    '/api/v1/cluster/select': () => fleetRoute(() => fleetSelect(u.searchParams)),
  };
  if (routes[u.pathname]) return sendJson(res, ...routes[u.pathname]());
  const job = /^\/api\/v1\/(?:jobs|experiments)\/([A-Za-z0-9._-]{1,64})$/.exec(u.pathname);
  if (job) return sendJson(res, ...oneJob(job[1]));
  const one = /^\/api\/v1\/gpus\/(\d{1,6})$/.exec(u.pathname);
  if (one) {
    const g = doc?.gpus.find((x) => x.index === Number(one[1]));
    if (!doc) return sendJson(res, 503, { error: 'unavailable', message: 'no sample yet' });
    return g ? sendJson(res, 200, { ...g, timestamp: doc.timestamp, simulated: doc.simulated })
      : sendJson(res, 404, { error: 'not_found', message: `no GPU ${one[1]} on this node (${doc.gpus.length} GPUs)` });
  }
  if (u.pathname.startsWith('/api/')) return sendJson(res, 404, { error: 'not_found', message: u.pathname });
  let file = normalize(join(staticRoot, decodeURIComponent(u.pathname)));
  if (!file.startsWith(staticRoot)) return sendJson(res, 403, { error: 'forbidden', message: 'outside the static root' });
  if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
  if (!existsSync(file)) return sendJson(res, 404, { error: 'not_found', message: `${u.pathname} (did you run npm run build?)` });
  res.writeHead(200, { 'content-type': mime[extname(file)] ?? 'application/octet-stream' });
  createReadStream(file).pipe(res);
});

// --- WebSocket (RFC 6455, text frames only; enough for the dashboard) -------------------------------
const clients = new Set();

function frame(text) {
  const payload = Buffer.from(text);
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x81, n]) : n < 65536 ? Buffer.from([0x81, 126, n >> 8, n & 255]) : Buffer.alloc(10);
  if (n >= 65536) {
    head[0] = 0x81;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

function send(c, msg) {
  if (!c.sock.destroyed) c.sock.write(frame(JSON.stringify(msg)));
}

function schedule(c) {
  clearInterval(c.timer);
  c.timer = setInterval(() => doc && send(c, { event: 'gpu_status_update', data: doc }), c.periodMs);
}

function onMessage(c, text) {
  let m;
  try {
    m = JSON.parse(text);
  } catch {
    return send(c, { event: 'error', data: { error: 'bad_request', message: 'not JSON' } });
  }
  if (m.event === 'request_gpu_update') send(c, { event: 'gpu_status_update', data: doc });
  else if (m.event === 'set_period') {
    c.periodMs = Math.min(60000, Math.max(250, Number(m.data?.period_ms) || 1000));
    schedule(c);
    send(c, { event: 'period', data: { period_ms: c.periodMs } });
  }
}

server.on('upgrade', (req, sock) => {
  const u = new URL(req.url, 'http://x');
  const key = req.headers['sec-websocket-key'];
  if (u.pathname !== '/ws' || !key) return sock.destroy();
  const accept = createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  const c = { sock, periodMs: Math.min(60000, Math.max(250, Number(u.searchParams.get('period_ms')) || 1000)), timer: null, buf: Buffer.alloc(0) };
  clients.add(c);
  if (doc) send(c, { event: 'gpu_status', data: doc });
  schedule(c);
  sock.on('data', (chunk) => {
    c.buf = Buffer.concat([c.buf, chunk]);
    for (;;) {
      const b = c.buf;
      if (b.length < 2) return;
      const op = b[0] & 15;
      let len = b[1] & 127;
      let off = 2;
      if (len === 126) (len = b.readUInt16BE(2)), (off = 4);
      else if (len === 127) (len = Number(b.readBigUInt64BE(2))), (off = 10);
      const masked = b[1] & 128;
      const total = off + (masked ? 4 : 0) + len;
      if (b.length < total) return;
      const mask = masked ? b.subarray(off, off + 4) : null;
      const data = Buffer.from(b.subarray(total - len, total));
      if (mask) for (let i = 0; i < data.length; i++) data[i] ^= mask[i & 3];
      c.buf = b.subarray(total);
      if (op === 1) onMessage(c, data.toString());
      else if (op === 8) return sock.end(Buffer.from([0x88, 0]));
      else if (op === 9) sock.write(Buffer.concat([Buffer.from([0x8a, data.length]), data]));
    }
  });
  const drop = () => {
    clearInterval(c.timer);
    clients.delete(c);
  };
  sock.on('close', drop);
  sock.on('error', drop);
});

// --- main ----------------------------------------------------------------------------------------------
doc = await sample();
if (!doc) process.exit(1);
prefill(doc);
record(doc);
setInterval(async () => {
  const d = await sample();
  if (d) (doc = d), record(d);
}, 1000);
if (process.env.MOCK_ALERTS) {
  setInterval(() => {
    const a = toggleAlert();
    if (a) for (const c of clients) send(c, { event: a.kind, data: a });
  }, 20000);
}
server.listen(Number(opt.port), opt.host, () => {
  selfUrl = `http://${opt.host}:${server.address().port}`;
  console.log(`mock gpufleet agent on http://${opt.host}:${server.address().port}/ (static ${staticRoot})`);
});
