// The per-GPU page's time range, kept in the URL: `range=6h` (a preset ending now) or `from=..&to=..`
// (epoch seconds, a fixed window: what a custom pick or a drag-zoom makes). Pure functions, no DOM.

export const PRESETS: { key: string; label: string; spanS: number }[] = [
  { key: '5m', label: '5 m', spanS: 300 },
  { key: '1h', label: '1 h', spanS: 3600 },
  { key: '6h', label: '6 h', spanS: 6 * 3600 },
  { key: '24h', label: '24 h', spanS: 86400 },
  { key: '7d', label: '7 d', spanS: 7 * 86400 },
  { key: '30d', label: '30 d', spanS: 30 * 86400 },
];
export const DEFAULT_RANGE = '1h';

export type TimeRange = { kind: 'preset'; key: string; spanS: number } | { kind: 'custom'; fromS: number; toS: number };

/** The range in a route's query; an unknown or inverted one falls back to the default preset. */
export function parseRange(q: URLSearchParams): TimeRange {
  const from = Number(q.get('from'));
  const to = Number(q.get('to'));
  if (q.has('from') && q.has('to') && Number.isFinite(from) && Number.isFinite(to) && from > 0 && to > from)
    return { kind: 'custom', fromS: Math.floor(from), toS: Math.ceil(to) };
  const p = PRESETS.find((x) => x.key === q.get('range')) ?? PRESETS.find((x) => x.key === DEFAULT_RANGE)!;
  return { kind: 'preset', key: p.key, spanS: p.spanS };
}

export const spanOf = (r: TimeRange) => (r.kind === 'preset' ? r.spanS : r.toS - r.fromS);

// Bucket widths a person reads easily; the step is the first that keeps a chart under ~400 points, which
// is about one point per two pixels of a wide chart.
const STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
const MAX_POINTS = 400;

export function stepFor(spanS: number): number {
  for (const s of STEPS_S) if (spanS / s <= MAX_POINTS) return s;
  return Math.ceil(spanS / MAX_POINTS / 86400) * 86400;
}

/** A step of one second shows the raw samples, so there is nothing between min and max to draw. */
export const showsBand = (stepS: number) => stepS > 1;

/** [from, to] in epoch seconds; a preset ends at `nowMs`. */
export function bounds(r: TimeRange, nowMs: number): [number, number] {
  if (r.kind === 'custom') return [r.fromS, r.toS];
  const now = Math.floor(nowMs / 1000);
  return [now - r.spanS, now];
}

/** epoch seconds → the value of an <input type="datetime-local"> in the browser's zone. */
export function toLocalInput(s: number): string {
  const d = new Date(s * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** An <input type="datetime-local"> value → epoch seconds, or null. */
export function fromLocalInput(v: string): number | null {
  const t = new Date(v).getTime();
  return Number.isFinite(t) ? Math.floor(t / 1000) : null;
}
