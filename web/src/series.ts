// Time series for the charts: one store per metric, one column per GPU, rows sorted by time.
// Seeded from the history endpoint, then appended from live snapshots; history that arrives after
// live points (first load, or the gap after a reconnect) is merged in by time.
import type uPlot from 'uplot';

export const WINDOW_MS = 15 * 60 * 1000;

// Column form, as uPlot takes it: one array of times and one array of values per GPU, all the same
// length. toAligned hands these arrays out as they are (no copy per update: with 64 GPUs and thousands of
// rows, rebuilding them on every update cost more than the whole rest of an update).
type Value = number | null | undefined; // undefined: no sample of that GPU at that time

export class SeriesStore {
  private ts: number[] = []; // epoch ms, ascending
  private xs: number[] = []; // the same times in seconds (uPlot's x)
  private cols = new Map<number, Value[]>();

  /** Sets the value of `gpu` at time `t` (ms), inserting a row where needed. */
  put(t: number, gpu: number, value: number | null): void {
    const ts = this.ts;
    let col = this.cols.get(gpu);
    if (!col) {
      col = new Array<Value>(ts.length).fill(undefined);
      this.cols.set(gpu, col);
    }
    // Live points arrive in order: the common case is an append or the last row.
    let i = ts.length;
    if (i > 0 && ts[i - 1] >= t) {
      let lo = 0;
      let hi = ts.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ts[mid] < t) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    if (i < ts.length && ts[i] === t) {
      col[i] = value;
      return;
    }
    if (i === ts.length) {
      ts.push(t);
      this.xs.push(t / 1000);
      for (const c of this.cols.values()) c.push(undefined);
    } else {
      ts.splice(i, 0, t);
      this.xs.splice(i, 0, t / 1000);
      for (const c of this.cols.values()) c.splice(i, 0, undefined);
    }
    col[i] = value;
  }

  /** Drops rows older than the window, measured back from the newest row: the agent's clock, not the
   *  browser's (the two may disagree). */
  prune(): void {
    const last = this.lastT;
    if (last === null) return;
    const min = last - WINDOW_MS;
    let n = 0;
    while (n < this.ts.length && this.ts[n] < min) n++;
    // Cutting the front of every column is a copy of them all: it is done once ~1/64 of the window is
    // overdue, not on every update (the charts then show up to that much more than the window).
    if (!n || n < Math.max(1, this.ts.length >> 6)) return;
    this.ts.splice(0, n);
    this.xs.splice(0, n);
    for (const c of this.cols.values()) c.splice(0, n);
  }

  get gpus(): number[] {
    return [...this.cols.keys()].sort((a, b) => a - b);
  }

  get length(): number {
    return this.ts.length;
  }

  /** Time from the oldest row to the newest, ms. */
  get spanMs(): number {
    return this.ts.length ? this.ts[this.ts.length - 1] - this.ts[0] : 0;
  }

  get lastT(): number | null {
    return this.ts.length ? this.ts[this.ts.length - 1] : null;
  }

  /**
   * toAligned with at most about `maxRows` rows: when there are more, the rows are cut into maxRows/2
   * buckets of equal time and each GPU's bucket becomes its min and its max, in the order they occurred
   * (at the bucket's first and last time), so a spike stays visible. The newest row is kept as it is (the
   * legend reads it as "now"). A chart gets about two rows per pixel this way; uPlot would draw no more
   * than that anyway, but it reads every row to find out.
   */
  toAlignedThin(gpus: number[], maxRows: number): uPlot.AlignedData {
    const n = this.ts.length;
    const buckets = Math.floor(maxRows / 2);
    if (buckets < 1 || n <= maxRows) return this.toAligned(gpus);
    const t0 = this.ts[0];
    const width = (this.ts[n - 1] - t0) / buckets || 1;
    // Bucket bounds: rows [starts[b], starts[b+1]) of all but the newest row.
    const starts: number[] = [];
    let row = 0;
    for (let b = 0; b < buckets && row < n - 1; b++) {
      const end = t0 + (b + 1) * width;
      if (this.ts[row] >= end) continue;
      starts.push(row);
      while (row < n - 1 && this.ts[row] < end) row++;
    }
    starts.push(n - 1);
    const m = starts.length - 1;
    const xs = new Array<number>(2 * m + 1);
    for (let b = 0; b < m; b++) {
      xs[2 * b] = this.xs[starts[b]];
      xs[2 * b + 1] = this.xs[starts[b + 1] - 1];
    }
    xs[2 * m] = this.xs[n - 1];
    const cols = gpus.map((g) => {
      const src = this.cols.get(g);
      const out = new Array<Value>(2 * m + 1).fill(undefined);
      if (!src) return out;
      for (let b = 0; b < m; b++) {
        let lo = Infinity;
        let hi = -Infinity;
        let loAt = 0;
        let hiAt = 0;
        let sawNull = false;
        for (let i = starts[b]; i < starts[b + 1]; i++) {
          const v = src[i];
          if (v === undefined) continue;
          if (v === null) {
            sawNull = true;
            continue;
          }
          if (v < lo) (lo = v), (loAt = i);
          if (v > hi) (hi = v), (hiAt = i);
        }
        if (lo === Infinity) {
          if (sawNull) out[2 * b] = out[2 * b + 1] = null;
          continue;
        }
        out[2 * b] = loAt <= hiAt ? lo : hi;
        out[2 * b + 1] = loAt <= hiAt ? hi : lo;
      }
      out[2 * m] = src[n - 1];
      return out;
    });
    return [xs, ...cols] as uPlot.AlignedData;
  }

  /** uPlot's column form: x in seconds, then one column per GPU in `gpus` order. The arrays are the
   *  store's own: they change with the next put, so hand them to uPlot again (setData) after each change. */
  toAligned(gpus: number[]): uPlot.AlignedData {
    const cols = gpus.map((g) => this.cols.get(g) ?? new Array<Value>(this.ts.length).fill(undefined));
    return [this.xs, ...cols] as uPlot.AlignedData;
  }
}
