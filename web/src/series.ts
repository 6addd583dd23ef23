// Time series for the charts: one store per metric, one column per GPU, rows sorted by time.
// Seeded from the history endpoint, then appended from live snapshots; history that arrives after
// live points (first load, or the gap after a reconnect) is merged in by time.
import type uPlot from 'uplot';

/** What the live charts hold: the last hour. */
export const WINDOW_MS = 60 * 60 * 1000;

// Column form, as uPlot takes it: one array of times and one array of values per GPU, all the same
// length. toAligned hands these arrays out as they are (no copy per update: with 64 GPUs and thousands of
// rows, rebuilding them on every update cost more than the whole rest of an update).
type Value = number | null | undefined; // undefined: no sample of that GPU at that time

/** How a column is thinned into two rows per bucket: its min and max in the order they happened (a line:
 *  spikes stay), its min twice (a band's lower edge) or its max twice (its upper edge). */
type Thin = 'minmax' | 'min' | 'max';

export class SeriesStore {
  private ts: number[] = []; // epoch ms, ascending
  private xs: number[] = []; // the same times in seconds (uPlot's x)
  private cols = new Map<number, Value[]>();
  private colList: Value[][] = []; // the same columns, for loops
  // Across all GPUs, per row: min, mean and max of the values present. Valid for the first
  // aggMin.length rows; a put truncates them to its row, aggregate() extends them to every row. Live
  // updates only append, so each redraw folds in the few new rows, not the whole window.
  private aggMin: Value[] = [];
  private aggMean: Value[] = [];
  private aggMax: Value[] = [];

  /** Sets the value of `gpu` at time `t` (ms), inserting a row where needed. */
  put(t: number, gpu: number, value: number | null): void {
    const ts = this.ts;
    let col = this.cols.get(gpu);
    if (!col) {
      col = new Array<Value>(ts.length).fill(undefined);
      this.cols.set(gpu, col);
      this.colList.push(col);
      this.dropAggregates(0);
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
    this.dropAggregates(i);
    if (i < ts.length && ts[i] === t) {
      col[i] = value;
      return;
    }
    if (i === ts.length) {
      ts.push(t);
      this.xs.push(t / 1000);
      for (const c of this.colList) c.push(undefined);
    } else {
      ts.splice(i, 0, t);
      this.xs.splice(i, 0, t / 1000);
      for (const c of this.colList) c.splice(i, 0, undefined);
    }
    col[i] = value;
  }

  private dropAggregates(from: number): void {
    if (this.aggMin.length > from) this.aggMin.length = this.aggMean.length = this.aggMax.length = from;
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
    for (const c of this.colList) c.splice(0, n);
    const kept = Math.min(n, this.aggMin.length);
    for (const a of [this.aggMin, this.aggMean, this.aggMax]) a.splice(0, kept);
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

  get firstT(): number | null {
    return this.ts.length ? this.ts[0] : null;
  }

  get lastT(): number | null {
    return this.ts.length ? this.ts[this.ts.length - 1] : null;
  }

  /** Brings the across-GPU min/mean/max up to the newest row (only the rows changed since last time). */
  private aggregate(): void {
    const n = this.ts.length;
    const cols = this.colList;
    for (let r = this.aggMin.length; r < n; r++) {
      let lo = Infinity;
      let hi = -Infinity;
      let sum = 0;
      let count = 0;
      let sawNull = false;
      for (let c = 0; c < cols.length; c++) {
        const v = cols[c][r];
        if (v === undefined) continue;
        if (v === null) {
          sawNull = true;
          continue;
        }
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        sum += v;
        count++;
      }
      const none = sawNull ? null : undefined;
      this.aggMin.push(count ? lo : none);
      this.aggMax.push(count ? hi : none);
      this.aggMean.push(count ? sum / count : none);
    }
  }

  /**
   * The `k` GPUs with the highest mean over the newest `rows` rows (GPUs without a value there last),
   * ties to the lower index: the lines a band chart draws when nobody picked any.
   */
  top(k: number, rows: number): number[] {
    const n = this.ts.length;
    const from = Math.max(0, n - rows);
    const score: [number, number][] = [];
    for (const [g, col] of this.cols) {
      let sum = 0;
      let count = 0;
      for (let i = from; i < n; i++) {
        const v = col[i];
        if (typeof v === 'number') (sum += v), count++;
      }
      score.push([g, count ? sum / count : -Infinity]);
    }
    score.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    return score.slice(0, k).map(([g]) => g);
  }

  /**
   * A band chart's data: x, then the mean, min and max across every GPU, then one column per GPU in
   * `lines`. With more than `maxRows` rows it is thinned like toAlignedThin (the band's edges keep
   * each bucket's extreme: its lower edge the min, its upper edge the max).
   */
  toAlignedBand(lines: number[], maxRows: number): uPlot.AlignedData {
    this.aggregate();
    const cols: [ArrayLike<Value>, Thin][] = [
      [this.aggMean, 'minmax'],
      [this.aggMin, 'min'],
      [this.aggMax, 'max'],
      ...lines.map((g): [ArrayLike<Value>, Thin] => [this.column(g), 'minmax']),
    ];
    return this.thin(cols, maxRows);
  }

  /**
   * toAligned with at most about `maxRows` rows: when there are more, the rows are cut into maxRows/2
   * buckets of equal time and each GPU's bucket becomes its min and its max, in the order they occurred
   * (at the bucket's first and last time), so a spike stays visible. The newest row is kept as it is (the
   * legend reads it as "now"). A chart gets about two rows per pixel this way; uPlot would draw no more
   * than that anyway, but it reads every row to find out.
   */
  toAlignedThin(gpus: number[], maxRows: number): uPlot.AlignedData {
    return this.thin(
      gpus.map((g): [ArrayLike<Value>, Thin] => [this.column(g), 'minmax']),
      maxRows,
    );
  }

  private column(g: number): Value[] {
    return this.cols.get(g) ?? new Array<Value>(this.ts.length).fill(undefined);
  }

  private thin(cols: [ArrayLike<Value>, Thin][], maxRows: number): uPlot.AlignedData {
    const n = this.ts.length;
    const buckets = Math.floor(maxRows / 2);
    if (buckets < 1 || n <= maxRows) return [this.xs, ...cols.map(([c]) => c)] as uPlot.AlignedData;
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
    const out = cols.map(([src, how]) => {
      const o = new Array<Value>(2 * m + 1).fill(undefined);
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
          if (sawNull) o[2 * b] = o[2 * b + 1] = null;
          continue;
        }
        if (how === 'min') o[2 * b] = o[2 * b + 1] = lo;
        else if (how === 'max') o[2 * b] = o[2 * b + 1] = hi;
        else {
          o[2 * b] = loAt <= hiAt ? lo : hi;
          o[2 * b + 1] = loAt <= hiAt ? hi : lo;
        }
      }
      o[2 * m] = src[n - 1];
      return o;
    });
    return [xs, ...out] as uPlot.AlignedData;
  }

  /** uPlot's column form: x in seconds, then one column per GPU in `gpus` order. The arrays are the
   *  store's own: they change with the next put, so hand them to uPlot again (setData) after each change. */
  toAligned(gpus: number[]): uPlot.AlignedData {
    return [this.xs, ...gpus.map((g) => this.column(g))] as uPlot.AlignedData;
  }
}
