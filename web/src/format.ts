// Formatting. A null value prints "n/a": a reading the backend did not give is never shown as 0.

export const NA = 'n/a';

export function fmtNum(v: number | null | undefined, digits = 0, unit = ''): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return NA;
  return v.toFixed(digits) + unit;
}

// Intl formatters are made once: toLocaleString() builds one per call, and with 64 GPUs the tables that
// re-render on every live update made that the largest script cost of an update.
const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const clockFmt = new Intl.DateTimeFormat([], { hour: 'numeric', minute: '2-digit', second: '2-digit', hour12: false });
const dayFmt = new Intl.DateTimeFormat([], { hour12: false, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

/** 12345.6 → "12,346". */
export function fmtInt(v: number): string {
  return intFmt.format(Math.round(v));
}

/** The time of day, 24 h ("13:05:09"). */
export function fmtClock(ms: number): string {
  return clockFmt.format(ms);
}

export function fmtMib(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return NA;
  return `${fmtInt(v)} MiB`;
}

export function pct(part: number | null, whole: number | null): number | null {
  if (part === null || whole === null || whole <= 0) return null;
  return Math.max(0, Math.min(100, (part / whole) * 100));
}

export function fmtTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return NA;
  const d = new Date(ms);
  const today = new Date();
  const sameDay = d.getFullYear() === today.getFullYear() && d.getMonth() === today.getMonth() && d.getDate() === today.getDate();
  return sameDay ? clockFmt.format(d) : dayFmt.format(d);
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
