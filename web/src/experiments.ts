// The experiments pages' queries (GET /api/v1/jobs paged and filtered, /api/v1/jobs/{id}, /api/v1/tasks)
// and what they derive from a job record (jobRecord.ts decodes it): the efficiency line, the metrics of a
// run and their labels. Pure functions: the views only render their results.
import { getJson, type FieldsDoc } from './api';
import { readExperiment, type Experiment } from './jobRecord';
import { arr, num, obj, parseTime, str, type Json } from './read';

export const PAGE_SIZE = 25;
export const STATUSES = ['waiting', 'running', 'succeeded', 'failed', 'no_gpus', 'interrupted', 'lost'];

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
