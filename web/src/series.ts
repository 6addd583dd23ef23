// Time series for the charts: one store per metric, one column per GPU, rows sorted by time.
// Seeded from the history endpoint, then appended from live snapshots; history that arrives after
// live points (first load, or the gap after a reconnect) is merged in by time.
import type uPlot from 'uplot';

export const WINDOW_MS = 15 * 60 * 1000;

interface Row {
  t: number; // epoch ms
  v: Map<number, number | null>; // GPU index → value (absent: no sample at that time)
}

export class SeriesStore {
  private rows: Row[] = [];
  private gpuSet = new Set<number>();

  /** Sets the value of `gpu` at time `t` (ms), inserting a row where needed. */
  put(t: number, gpu: number, value: number | null): void {
    this.gpuSet.add(gpu);
    const rows = this.rows;
    // Live points arrive in order: the common case is an append or the last row.
    let i = rows.length;
    if (i > 0 && rows[i - 1].t >= t) {
      let lo = 0;
      let hi = rows.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (rows[mid].t < t) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    if (i < rows.length && rows[i].t === t) rows[i].v.set(gpu, value);
    else rows.splice(i, 0, { t, v: new Map([[gpu, value]]) });
  }

  /** Drops rows older than the window, measured back from the newest row: the agent's clock, not the
   *  browser's (the two may disagree). */
  prune(): void {
    const last = this.lastT;
    if (last === null) return;
    const min = last - WINDOW_MS;
    let n = 0;
    while (n < this.rows.length && this.rows[n].t < min) n++;
    if (n) this.rows.splice(0, n);
  }

  get gpus(): number[] {
    return [...this.gpuSet].sort((a, b) => a - b);
  }

  get length(): number {
    return this.rows.length;
  }

  get lastT(): number | null {
    return this.rows.length ? this.rows[this.rows.length - 1].t : null;
  }

  /** uPlot's column form: x in seconds, then one column per GPU in `gpus` order. */
  toAligned(gpus: number[]): uPlot.AlignedData {
    const xs = this.rows.map((r) => r.t / 1000);
    const cols = gpus.map((g) => this.rows.map((r) => (r.v.has(g) ? (r.v.get(g) as number | null) : undefined)));
    return [xs, ...cols] as uPlot.AlignedData;
  }
}
