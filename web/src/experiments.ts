// The experiments pages' reading of job records (GET /api/v1/jobs, /api/v1/jobs/{id}, /api/v1/tasks):
// what the seed's GPU column, summary box, stats table and charts show, plus what the seed lacked
// (energy, p95, the lease, the efficiency line). Pure functions: the views only render their results.
import { arr, getJson, num, obj, parseTime, str, type FieldsDoc, type Json } from './api';

export const PAGE_SIZE = 25;
export const STATUSES = ['waiting', 'running', 'succeeded', 'failed', 'no_gpus', 'interrupted', 'lost'];

export interface MetricStat {
  mean: number | null;
  min: number | null;
  max: number | null;
  p95: number | null;
}

export interface GpuRunStats {
  index: number;
  name: string | null;
  uuid: string | null;
  samples: number | null;
  utilization: MetricStat;
  memoryMb: MetricStat;
  memoryPct: MetricStat;
  temperature: MetricStat;
  power: MetricStat;
  /** From the record, else integrated from the power series (trapezoids); null without either. */
  energyWh: number | null;
  energyFromSeries: boolean;
}

export interface RunSeries {
  index: number;
  /** Epoch seconds. */
  t: number[];
  utilization: (number | null)[];
  memoryPct: (number | null)[];
  temperature: (number | null)[];
  power: (number | null)[];
}

export interface Experiment {
  id: string;
  name: string | null;
  task: string | null;
  status: string | null;
  user: string | null;
  uid: number | null;
  command: string | null;
  exitCode: number | null;
  startedAt: number | null;
  endedAt: number | null;
  durationS: number | null;
  leaseId: string | null;
  gpuCount: number;
  gpuModel: string | null;
  gpuIndices: number[];
  cudaVisibleDevices: string | null;
  allocationMethod: string | null;
  allocationWhy: string | null;
  /** The record carries monitoring data (statistics, with or without the samples). */
  hasMonitoring: boolean;
  sampleCount: number | null;
  monitoringS: number | null;
  stats: GpuRunStats[];
  series: RunSeries[];
  seriesOmitted: string | null;
  error: string | null;
}

export interface ExperimentPage {
  jobs: Experiment[];
  total: number;
  limit: number;
  offset: number;
}

export interface TaskTotals {
  task: string;
  /** Whose runs: a task name is shared by every user, so each owner's runs of it are a row of their own. */
  user: string | null;
  uid: number | null;
  runs: number;
  succeeded: number;
  failed: number;
  running: number;
  gpuHours: number | null;
  lastStartedAt: number | null;
}

/** "NVIDIA H100 80GB HBM3" → "H100 80GB HBM3": the vendor's word is the same on every row (the seeds' decision). */
export function modelLabel(model: string | null): string | null {
  if (!model) return null;
  const m = model.replace(/^(NVIDIA|AMD|Intel)\s+/i, '').trim();
  return m || model;
}

function stat(x: unknown): MetricStat {
  const o = obj(x);
  return { mean: num(o.mean), min: num(o.min), max: num(o.max), p95: num(o.p95) };
}

const nums = (x: unknown): (number | null)[] => arr(x).map((v) => num(v));

/** Watt-hours from power samples at times in seconds (trapezoids; gaps with a missing sample are skipped). */
export function energyWh(t: number[], w: (number | null)[]): number | null {
  let j = 0;
  let any = false;
  for (let i = 1; i < t.length && i < w.length; i++) {
    const a = w[i - 1];
    const b = w[i];
    if (a === null || b === null) continue;
    j += ((a + b) / 2) * Math.max(0, t[i] - t[i - 1]);
    any = true;
  }
  return any ? j / 3600 : null;
}

export function readExperiment(x: unknown): Experiment {
  const j = obj(x);
  const gi = obj(j.gpu_info);
  const inner = obj(gi.gpu_info);
  const indices = (arr(inner.indices).length ? arr(inner.indices) : arr(gi.device_ids))
    .map((i) => Number(i))
    .filter((i) => Number.isInteger(i));
  const count = num(gi.count) ?? num(inner.count) ?? indices.length;
  const mon = obj(obj(j.metrics).gpu_monitoring);
  const startedAt = parseTime(j.started_at);
  const endedAt = parseTime(j.ended_at);
  const rawSeries = obj(mon.series);
  const statsDoc = obj(mon.gpu_stats);
  const stats: GpuRunStats[] = Object.keys(statsDoc)
    .map((k) => {
      const s = obj(statsDoc[k]);
      const index = Number(k);
      const ser = obj(rawSeries[k]);
      const joules = num(s.energy_joules);
      const fromSeries = joules === null ? energyWh(nums(ser.t).map((v) => v ?? 0), nums(ser.power_draw_w)) : null;
      return {
        index,
        name: str(s.name),
        uuid: str(s.uuid),
        samples: num(s.sample_count),
        utilization: stat(s.utilization),
        memoryMb: stat(s.memory_used_mb),
        memoryPct: stat(s.memory_usage_percent),
        temperature: stat(s.temperature_c),
        power: stat(s.power_draw_w),
        energyWh: joules !== null ? joules / 3600 : fromSeries,
        energyFromSeries: joules === null && fromSeries !== null,
      };
    })
    .filter((s) => Number.isInteger(s.index))
    .sort((a, b) => a.index - b.index);
  const t0 = (startedAt ?? 0) / 1000;
  const series: RunSeries[] = Object.keys(rawSeries)
    .map((k) => {
      const s = obj(rawSeries[k]);
      const index = Number(k);
      const st = stats.find((g) => g.index === index);
      // The samples carry MiB; the record's statistics carry both MiB and %, which gives the total.
      const perMb =
        st && st.memoryPct.mean !== null && st.memoryMb.mean !== null && st.memoryMb.mean > 0 ? st.memoryPct.mean / st.memoryMb.mean : null;
      return {
        index,
        t: nums(s.t).map((v) => t0 + (v ?? 0)),
        utilization: nums(s.utilization),
        memoryPct: nums(s.memory_used_mb).map((v) => (v === null || perMb === null ? null : v * perMb)),
        temperature: nums(s.temperature_c),
        power: nums(s.power_draw_w),
      };
    })
    .filter((s) => Number.isInteger(s.index))
    .sort((a, b) => a.index - b.index);
  const command = Array.isArray(j.command) ? j.command.map(String).join(' ') : str(j.command);
  const sampleCount = num(mon.sample_count);
  const dur = num(j.duration_seconds) ?? (startedAt !== null && endedAt !== null ? (endedAt - startedAt) / 1000 : null);
  return {
    id: String(j.id ?? '?'),
    name: str(j.name),
    task: str(j.task),
    status: str(j.status),
    user: str(j.user),
    uid: num(j.uid),
    command: command === '' ? null : command,
    exitCode: num(j.exit_code),
    startedAt,
    endedAt,
    durationS: dur,
    leaseId: str(j.lease_id),
    gpuCount: count,
    gpuModel: str(gi.model),
    gpuIndices: indices,
    cudaVisibleDevices: arr(gi.device_ids).length ? arr(gi.device_ids).map(String).join(',') : indices.length ? indices.join(',') : null,
    allocationMethod: str(inner.allocation_method),
    allocationWhy: str(inner.why),
    hasMonitoring: (sampleCount ?? 0) > 0 || stats.length > 0,
    sampleCount,
    monitoringS: num(mon.monitoring_duration_seconds),
    stats,
    series,
    seriesOmitted: str(mon.series_omitted),
    error: str(j.error),
  };
}

/** The efficiency line: GPU-hours held against the mean utilization of the GPUs held. */
export function efficiency(e: Experiment, now = Date.now()): { gpuHours: number; meanUtil: number | null; usedGpuHours: number | null } | null {
  if (e.gpuCount <= 0) return null;
  const s = e.durationS ?? (e.startedAt !== null ? ((e.endedAt ?? now) - e.startedAt) / 1000 : null);
  if (s === null) return null;
  const gpuHours = (e.gpuCount * s) / 3600;
  const means = e.stats.map((g) => g.utilization.mean).filter((v): v is number => v !== null);
  const meanUtil = means.length ? means.reduce((a, b) => a + b, 0) / means.length : null;
  return { gpuHours, meanUtil, usedGpuHours: meanUtil === null ? null : (gpuHours * meanUtil) / 100 };
}

export interface ListQuery {
  status?: string;
  user?: string;
  /** The owner's uid (a task group's runs: the owner of that row of totals). */
  uid?: number;
  task?: string;
  page: number;
  /** Runs per page (default PAGE_SIZE). */
  limit?: number;
}

export function listUrl(q: ListQuery): string {
  const limit = q.limit ?? PAGE_SIZE;
  const p = new URLSearchParams({ limit: String(limit), offset: String((Math.max(1, q.page) - 1) * limit), series: 'false' });
  if (q.status) p.set('status', q.status);
  if (q.user) p.set('user', q.user);
  if (q.uid !== undefined) p.set('uid', String(q.uid));
  if (q.task) p.set('task', q.task);
  return `api/v1/jobs?${p.toString()}`;
}

/** Tasks per page of the grouped view, and the newest runs shown under each. */
export const TASKS_PER_PAGE = 10;
export const RUNS_PER_TASK = 10;

export interface TaskQuery {
  user?: string;
  /** One task's rows only (one per owner). */
  task?: string;
  page: number;
  limit?: number;
}

export function tasksUrl(q: TaskQuery): string {
  const limit = q.limit ?? TASKS_PER_PAGE;
  const p = new URLSearchParams({ limit: String(limit), offset: String((Math.max(1, q.page) - 1) * limit) });
  if (q.user) p.set('user', q.user);
  if (q.task) p.set('task', q.task);
  return `api/v1/tasks?${p.toString()}`;
}

/**
 * The metrics of a run record (the seed's keys under metrics.gpu_monitoring) and the field of the agent's
 * table (GET /api/v1/fields) each one is, for its label, its unit and its history metric (a running
 * job's live series). Memory is recorded as a share of the total (memory_usage_percent): its unit is %.
 */
export interface RunMetric {
  id: 'utilization' | 'memory' | 'temperature' | 'power';
  field: string;
  /** The unit when it is not the field's. */
  unit?: string;
  yMax?: number;
}
export const RUN_METRICS: RunMetric[] = [
  { id: 'utilization', field: 'utilization', yMax: 100 },
  { id: 'memory', field: 'memory.used', unit: '%', yMax: 100 },
  { id: 'temperature', field: 'temperature' },
  { id: 'power', field: 'power_usage' },
];

/** A run metric's label and unit from the field table (until it has arrived: the metric's id, no unit). */
export function runMetricMeta(m: RunMetric, fields: FieldsDoc | null): { label: string; unit: string; historyMetric: string | null } {
  const f = fields?.fields.find((x) => x.key === m.field);
  return { label: f?.label ?? m.id, unit: m.unit ?? f?.unit ?? '', historyMetric: f?.historyMetric ?? null };
}

export const expApi = {
  page: async (q: ListQuery, signal?: AbortSignal): Promise<ExperimentPage> => {
    const d: Json = obj(await getJson(listUrl(q), signal));
    return {
      jobs: arr(d.jobs).map(readExperiment),
      total: num(d.total) ?? 0,
      limit: num(d.limit) ?? PAGE_SIZE,
      offset: num(d.offset) ?? 0,
    };
  },
  tasks: async (q: TaskQuery, signal?: AbortSignal): Promise<{ tasks: TaskTotals[]; total: number }> => {
    const d = obj(await getJson(tasksUrl(q), signal));
    return {
      total: num(d.total) ?? 0,
      tasks: arr(d.tasks).map((x) => {
        const t = obj(x);
        return {
          task: str(t.task) ?? '',
          user: str(t.user) || null,
          uid: num(t.uid),
          runs: num(t.runs) ?? 0,
          succeeded: num(t.succeeded) ?? 0,
          failed: num(t.failed) ?? 0,
          running: num(t.running) ?? 0,
          gpuHours: num(t.gpu_hours),
          lastStartedAt: parseTime(t.last_started_at),
        };
      }),
    };
  },
  /** One run: the job's record (GET /api/v1/jobs/{id}; /api/v1/experiments/{id} is the seeds' alias). */
  one: async (id: string, signal?: AbortSignal) => readExperiment(await getJson(`api/v1/jobs/${encodeURIComponent(id)}`, signal)),
};
