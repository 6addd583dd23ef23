// Formatting. A null value prints "n/a": a reading the backend did not give is never shown as 0.

export const NA = 'n/a';

export function fmtNum(v: number | null | undefined, digits = 0, unit = ''): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return NA;
  return v.toFixed(digits) + unit;
}

export function fmtMib(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return NA;
  return `${Math.round(v).toLocaleString('en-US')} MiB`;
}

export function pct(part: number | null, whole: number | null): number | null {
  if (part === null || whole === null || whole <= 0) return null;
  return Math.max(0, Math.min(100, (part / whole) * 100));
}

export function fmtTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return NA;
  const d = new Date(ms);
  const sameDay = new Date().toDateString() === d.toDateString();
  return sameDay
    ? d.toLocaleTimeString([], { hour12: false })
    : d.toLocaleString([], { hour12: false, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export function fmtAgo(ms: number | null | undefined, now = Date.now()): string {
  if (ms === null || ms === undefined) return NA;
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function fmtDuration(fromMs: number | null, toMs: number | null): string {
  if (fromMs === null || toMs === null) return NA;
  const s = Math.max(0, (toMs - fromMs) / 1000);
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** "high_temperature_alert" → "high temperature". */
export function ruleLabel(rule: string): string {
  return rule.replace(/_alert$/, '').replace(/_/g, ' ');
}

/** Series colours, one per GPU, readable on dark and light backgrounds. */
export const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948', '#ff9da7', '#9c755f', '#8cd17d'];
export const gpuColor = (index: number): string => PALETTE[index % PALETTE.length];
