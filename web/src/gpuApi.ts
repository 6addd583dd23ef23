// What the per-GPU page asks the agent: one GPU's document, one GPU's history of one metric with each
// bucket's avg/min/max, and the alert episodes. Kept beside api.ts (which holds the shared readers) so the
// normalised shapes of the node view stay as they are.
import { getJson, readAlert, readGpu, type Alert, type Gpu } from './api';
import { arr, num, obj, parseTime, str } from './read';

export interface BandPoint {
  /** Bucket start, epoch ms. */
  t: number;
  avg: number | null;
  min: number | null;
  max: number | null;
}

export interface GpuHistory {
  metric: string;
  unit: string | null;
  /** The bucket width the agent used, in seconds. */
  stepS: number | null;
  points: BandPoint[];
}

/** A time range as the history endpoint takes it: `since` is a duration before now ("6h") or epoch
 *  seconds; `until` (epoch seconds) is left out for "until now". */
export interface HistoryQuery {
  since: string;
  until?: string;
  stepS: number;
}

/** An alert episode's title for people: the message, or the rule and its value. */
export function episodeTitle(a: Alert): string {
  return a.message ?? `${a.rule.replace(/_/g, ' ')}${a.value === null ? '' : ` (value ${a.value})`}`;
}

export function readGpuHistory(x: unknown, gpu: number): GpuHistory {
  const d = obj(x);
  const series = arr(d.series).map(obj);
  const mine = series.find((s) => num(s.gpu) === gpu) ?? series[0] ?? {};
  const points: BandPoint[] = [];
  for (const p of arr(mine.points)) {
    const po = obj(p);
    const t = parseTime(po.t);
    if (t === null) continue;
    const avg = num(po.avg) ?? num(po.value);
    points.push({ t, avg, min: num(po.min) ?? avg, max: num(po.max) ?? avg });
  }
  return { metric: str(d.metric) ?? '', unit: str(d.unit), stepS: num(d.step_s), points };
}

export const gpuApi = {
  gpu: async (index: number, signal?: AbortSignal): Promise<Gpu> => readGpu(await getJson(`api/v1/gpus/${index}`, signal), index),
  history: async (gpu: number, metric: string, q: HistoryQuery, signal?: AbortSignal): Promise<GpuHistory> => {
    const p = new URLSearchParams({ gpu: String(gpu), metric, since: q.since, step: String(q.stepS) });
    if (q.until !== undefined) p.set('until', q.until);
    return readGpuHistory(await getJson(`api/v1/history?${p.toString()}`, signal), gpu);
  },
  /** One GPU's alert episodes that overlap the range (firing and recent), oldest first: the agent filters
   *  them in its store (?gpu, ?since, ?until), so an episode of a 30-day range is found however many newer
   *  ones the other GPUs had. */
  episodes: async (gpu: number, range: { since: string; until?: string }, signal?: AbortSignal): Promise<Alert[]> => {
    const p = new URLSearchParams({ gpu: String(gpu), since: range.since, limit: '1000' });
    if (range.until !== undefined) p.set('until', range.until);
    const d = obj(await getJson(`api/v1/alerts?${p.toString()}`, signal));
    const byKey = new Map<string, Alert>();
    for (const a of [...arr(d.firing), ...arr(d.recent)].map((x) => readAlert(x))) {
      if (a.gpuIndex !== gpu || a.startedAt === null) continue;
      const had = byKey.get(a.key);
      if (!had || a.resolvedAt !== null) byKey.set(a.key, a);
    }
    return [...byKey.values()].sort((a, b) => (a.startedAt ?? 0) - (b.startedAt ?? 0));
  },
};
