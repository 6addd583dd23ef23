// The node view's live data: the /ws stream (api.ts's LiveLink) and the series stores of the charted
// metrics it feeds, seeded with the last hour of history. History is merged only before a store's first
// live point (so it never interleaves with live points), and after a reconnect the gap between the last
// live sample and the new first one is filled from history.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, LiveLink, type Alert, type ChartMetric, type FieldsDoc, type LinkState, type Snapshot } from './api';
import { CHARTED_KEY, chartMetrics, initialCharted, type MetricDef } from './charts';
import { PERIODS_MS } from './components/Header';
import { SeriesStore } from './series';

const PERIOD_KEY = 'gpufleet.period_ms';

function initialPeriod(): number {
  const saved = Number(localStorage.getItem(PERIOD_KEY));
  return PERIODS_MS.includes(saved) ? saved : 1000;
}

export interface LiveEvents {
  alert(a: Alert): void;
  /** The link is back after a drop: events may have been missed. */
  reconnected(): void;
}

export interface Live {
  /** The latest sample (null until the first). */
  snap: Snapshot | null;
  link: LinkState;
  /** While reconnecting: in how long the next attempt is. */
  retryIn: number | null;
  periodMs: number;
  setPeriod: (ms: number) => void;
  /** Bumped whenever a store changes. */
  version: number;
  /** The store of a charted metric. */
  storeOf: (m: ChartMetric) => SeriesStore;
  /** Every store, for the GPUs they have seen. */
  stores: Map<ChartMetric, SeriesStore>;
  /** The charted metrics' definitions, in the field table's order. */
  metrics: MetricDef[];
  charted: ChartMetric[];
  /** Charts `next` (history metric names) from now on, and remembers it. */
  chooseCharted: (next: ChartMetric[]) => void;
}

/** Merges the history since `since` of `list`'s metrics into their stores: points after `after` and before
 *  `before(metric)` (where the live points of that store begin). A metric whose history cannot be read
 *  keeps what it has. */
async function mergeHistory(
  storeOf: (m: ChartMetric) => SeriesStore,
  list: MetricDef[],
  since: string,
  after: number,
  before: (m: ChartMetric) => number,
): Promise<void> {
  const docs = await Promise.allSettled(list.map((m) => api.history(m.metric, since)));
  docs.forEach((d, i) => {
    if (d.status !== 'fulfilled') return;
    const { metric, scale = 1 } = list[i];
    const store = storeOf(metric);
    const until = before(metric);
    for (const s of d.value.series)
      for (const p of s.points) if (p.t > after && p.t < until) store.put(p.t, s.gpu, p.v === null ? null : p.v * scale);
    store.prune();
  });
}

export function useLive(fields: FieldsDoc | null, events: LiveEvents): Live {
  const [snap, setSnap] = useState<Snapshot | null>(null);
  const [link, setLink] = useState<LinkState>('connecting');
  const [retryIn, setRetryIn] = useState<number | null>(null);
  const [periodMs, setPeriodMs] = useState(initialPeriod);
  const [version, setVersion] = useState(0);
  const [charted, setCharted] = useState<ChartMetric[]>(initialCharted);
  const metrics = useMemo(() => (fields ? chartMetrics(fields, charted) : []), [fields, charted]);
  // The link's handlers are set up once at mount: they read these through refs.
  const metricsRef = useRef<MetricDef[]>([]);
  metricsRef.current = metrics;
  const chartedRef = useRef(charted);
  chartedRef.current = charted;
  const eventsRef = useRef(events);
  eventsRef.current = events;
  // One store per charted metric, made when it is charted and dropped when it is not (only charted
  // metrics are fed from the live stream; charting one again seeds it from history).
  const stores = useMemo(() => new Map<ChartMetric, SeriesStore>(), []);
  const storeOf = (m: ChartMetric) => {
    let st = stores.get(m);
    if (!st) stores.set(m, (st = new SeriesStore()));
    return st;
  };
  const linkRef = useRef<LiveLink | null>(null);
  // Time of the first live sample of the current connection, and of the last live sample overall.
  const liveFrom = useRef<number>(Infinity);
  const lastLive = useRef<number | null>(null);
  const latestSnap = useRef<Snapshot | null>(null);
  const frame = useRef<number | null>(null);
  const bump = () => setVersion((v) => v + 1);

  const loadHistory = (since: string, after: number, before: (m: ChartMetric) => number, list: MetricDef[] = metricsRef.current) =>
    mergeHistory(storeOf, list, since, after, before).then(bump);

  const onSnapshot = (s: Snapshot, initial: boolean) => {
    if (initial) {
      const gapFrom = lastLive.current;
      liveFrom.current = s.t;
      if (gapFrom !== null && s.t - gapFrom > 5000) void loadHistory(String(Math.floor(gapFrom / 1000)), gapFrom, () => liveFrom.current);
      if (gapFrom !== null) eventsRef.current.reconnected();
    }
    lastLive.current = s.t;
    for (const m of metricsRef.current) {
      const store = storeOf(m.metric);
      for (const g of s.gpus) store.put(s.t, g.index, m.pick(g));
      store.prune();
    }
    // The page shows the update in the next animation frame: the cards, tables and the charts' redraw
    // (drawn in the same render) land in one frame, painted once; updates that arrive faster than frames
    // (or while the tab is hidden) are folded into the latest.
    latestSnap.current = s;
    if (frame.current === null)
      frame.current = requestAnimationFrame(() => {
        frame.current = null;
        setSnap(latestSnap.current);
        bump();
      });
  };

  useEffect(() => {
    const live = new LiveLink(
      {
        snapshot: onSnapshot,
        alert: (a) => eventsRef.current.alert(a),
        period: (ms) => setPeriodMs(ms),
        state: (st, retry) => {
          setLink(st);
          setRetryIn(retry ?? null);
        },
      },
      periodMs,
    );
    linkRef.current = live;
    live.start();
    return () => live.stop();
    // Handlers only touch refs and state setters; the link lives as long as the page.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // The charts need the field table; the history seed follows it.
  useEffect(() => {
    if (fields) void loadHistory('1h', -Infinity, () => liveFrom.current, chartMetrics(fields, chartedRef.current));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [fields]);

  const setPeriod = (ms: number) => {
    setPeriodMs(ms);
    localStorage.setItem(PERIOD_KEY, String(ms));
    linkRef.current?.setPeriod(ms);
  };

  const chooseCharted = (next: ChartMetric[]) => {
    const added = next.filter((m) => !charted.includes(m));
    for (const m of charted) if (!next.includes(m)) stores.delete(m);
    setCharted(next);
    localStorage.setItem(CHARTED_KEY, JSON.stringify(next));
    // A newly charted metric: its hour of history, up to its first live point.
    if (fields && added.length) void loadHistory('1h', -Infinity, (m) => stores.get(m)?.firstT ?? Infinity, chartMetrics(fields, added));
  };

  return { snap, link, retryIn, periodMs, setPeriod, version, storeOf, stores, metrics, charted, chooseCharted };
}
