// The node view's live charts: which metrics are charted (the user's choice, kept in localStorage) and
// what each one is, from the agent's field table.
import type { ChartMetric, FieldsDoc, Gpu } from './api';

export interface MetricDef {
  metric: ChartMetric;
  title: string;
  unit: string;
  pick: (g: Gpu) => number | null;
  /** History values (in the snapshot's unit) → chart unit. */
  scale?: number;
  yMax?: number;
  fmt: (v: number) => string;
}

/** The charts a first visit shows, by history metric name: a layout choice. Which metrics can be charted,
 *  and what each one is (label, unit, where a GPU document carries it), comes from the agent's field table
 *  (GET /api/v1/fields, every field with a history_metric); the chart picker offers all of them and keeps
 *  the choice in localStorage. */
const DEFAULT_CHARTED: ChartMetric[] = ['utilization', 'memory_used', 'temperature', 'power'];
export const CHARTED_KEY = 'gpufleet.charts';

export function initialCharted(): ChartMetric[] {
  try {
    const saved: unknown = JSON.parse(localStorage.getItem(CHARTED_KEY) ?? 'null');
    if (Array.isArray(saved) && saved.every((x) => typeof x === 'string')) return saved as string[];
  } catch {
    // a value written by hand: the default
  }
  return DEFAULT_CHARTED;
}

/** The charted metrics' definitions, in the field table's order. */
export function chartMetrics(doc: FieldsDoc, charted: ChartMetric[]): MetricDef[] {
  const out: MetricDef[] = [];
  for (const f of doc.fields) {
    const metric = f.historyMetric;
    if (!metric || !charted.includes(metric)) continue;
    const title = f.label.charAt(0).toUpperCase() + f.label.slice(1);
    if (f.unit === 'MiB') {
      // Memory reads better in GiB at chart scale.
      out.push({
        metric, title, unit: 'GiB', scale: 1 / 1024,
        pick: (g) => { const v = g.values[f.key] ?? null; return v === null ? null : v / 1024; },
        fmt: (v) => `${v.toFixed(v >= 10 || v === 0 ? 0 : 1)} GiB`,
      });
    } else {
      const unit = f.unit ?? '';
      out.push({
        metric, title, unit,
        pick: (g) => g.values[f.key] ?? null,
        yMax: unit === '%' ? 100 : undefined,
        fmt: (v) => `${v.toFixed(0)}${unit ? ` ${unit}` : ''}`,
      });
    }
  }
  return out;
}

/** `lines=3,7` in the node view's URL: the GPUs picked for a line of their own in band charts. */
export function parseLines(q: string | null): number[] {
  if (!q) return [];
  const out = q.split(',').map(Number).filter((n) => Number.isInteger(n) && n >= 0);
  return [...new Set(out)].sort((a, b) => a - b);
}
