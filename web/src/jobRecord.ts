// The job record (GET /api/v1/jobs, /api/v1/jobs/{id}, POST /api/v1/jobs), decoded once: the experiments
// pages read all of it (what the seed's GPU column, summary box, stats table and charts show, plus what the
// seed lacked: energy, p95, the lease), the node view's job list and the submit form a projection of it.
import { arr, num, obj, parseTime, str } from './read';

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
  /** "api" for a job submitted with POST /api/v1/jobs (those can be cancelled from the node view). */
  submittedVia: string | null;
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
    submittedVia: str(j.submitted_via),
  };
}

/** The node view's and the submit form's part of a job record. */
export type Job = Pick<
  Experiment,
  'id' | 'name' | 'status' | 'command' | 'exitCode' | 'startedAt' | 'endedAt' | 'gpuModel' | 'gpuIndices' | 'submittedVia'
>;

export function readJob(x: unknown): Job {
  const { id, name, status, command, exitCode, startedAt, endedAt, gpuModel, gpuIndices, submittedVia } = readExperiment(x);
  return { id, name, status, command, exitCode, startedAt, endedAt, gpuModel, gpuIndices, submittedVia };
}
