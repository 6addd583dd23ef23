// The defensive readers every decoder of the agent's documents uses: a missing or mistyped field becomes
// null (rendered "n/a"), never a false 0.

export type Json = Record<string, unknown>;

export const obj = (x: unknown): Json => (x !== null && typeof x === 'object' && !Array.isArray(x) ? (x as Json) : {});
export const arr = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
export const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);
export const str = (x: unknown): string | null => (typeof x === 'string' && x !== '' ? x : null);
export const first = <T>(...xs: (T | null)[]): T | null => {
  for (const x of xs) if (x !== null) return x;
  return null;
};
/** ISO 8601 string or epoch (s or ms) → epoch ms. */
export function parseTime(x: unknown): number | null {
  if (typeof x === 'string') {
    const t = Date.parse(x);
    return Number.isNaN(t) ? null : t;
  }
  const n = num(x);
  if (n === null) return null;
  return n < 1e11 ? n * 1000 : n; // seconds until the year 5138
}
