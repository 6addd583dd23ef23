import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, auth, LiveLink, type AgentHealth, type Alert, type ChartMetric, type FieldsDoc, type Gpu, type Job, type LeasesDoc, type LinkState, type Snapshot } from './api';
import { Alerts } from './components/Alerts';
import { BAND_TOP, Chart, LINES_MAX_GPUS } from './components/Chart';
import { ChartPicker } from './components/ChartPicker';
import { ClusterView, useClusterRoutes, ViewTabs, viewOfRoute } from './components/Cluster';
import { ExperimentsView } from './components/Experiments';
import { GpuPage } from './components/GpuPage';
import { GpuCard } from './components/GpuCard';
import { Header, PERIODS_MS } from './components/Header';
import { Processes } from './components/Processes';
import { SubmitJob } from './components/SubmitJob';
import { Jobs, Leases } from './components/Work';
import { fmtClock } from './format';
import { href, navigate, useRoute } from './router';
import { SeriesStore } from './series';

interface MetricDef {
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
const CHARTED_KEY = 'gpufleet.charts';

function initialCharted(): ChartMetric[] {
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

/** What the processes table shows, as a string: it is rebuilt only when this changes. */
function processSignature(gpus: Gpu[]): string {
  let s = '';
  for (const g of gpus)
    for (const p of g.processes) s += `${g.index}/${p.pid}/${p.memoryMib}/${p.name}/${p.user}/${p.container}/${p.command}/${p.migProfile}\n`;
  return s;
}

/** `lines=3,7` in the node view's URL: the GPUs picked for a line of their own in band charts. */
function parseLines(q: string | null): number[] {
  if (!q) return [];
  const out = q.split(',').map(Number).filter((n) => Number.isInteger(n) && n >= 0);
  return [...new Set(out)].sort((a, b) => a - b);
}

const POLL_MS = 10_000;
const RECENT_MAX = 50;
const PERIOD_KEY = 'gpufleet.period_ms';

function initialPeriod(): number {
  const saved = Number(localStorage.getItem(PERIOD_KEY));
  return PERIODS_MS.includes(saved) ? saved : 1000;
}

function useDarkScheme(): boolean {
  const mq = useMemo(() => window.matchMedia('(prefers-color-scheme: dark)'), []);
  const [dark, setDark] = useState(mq.matches);
  useEffect(() => {
    const on = () => setDark(mq.matches);
    mq.addEventListener('change', on);
    return () => mq.removeEventListener('change', on);
  }, [mq]);
  return dark;
}

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** One alert episode: the same rule on the same GPU from one start to its resolve. */
const episode = (a: Alert) => `${a.key}@${a.startedAt ?? a.at ?? ''}`;

/** Recent episodes, newest event first, one row each (a resolve replaces its firing row). */
function mergeRecent(prev: Alert[], incoming: Alert[]): Alert[] {
  const byEpisode = new Map<string, Alert>();
  for (const a of [...prev, ...incoming]) {
    const had = byEpisode.get(episode(a));
    if (!had || had.state !== 'resolved') byEpisode.set(episode(a), a);
  }
  return [...byEpisode.values()].sort((a, b) => (b.at ?? 0) - (a.at ?? 0)).slice(0, RECENT_MAX);
}

export function App() {
  const [snap, setSnap] = useState<Snapshot | null>(null);
  const [link, setLink] = useState<LinkState>('connecting');
  const [retryIn, setRetryIn] = useState<number | null>(null);
  const [periodMs, setPeriodMs] = useState(initialPeriod);
  const [firing, setFiring] = useState<Map<string, Alert>>(new Map());
  const [recent, setRecent] = useState<Alert[]>([]);
  const [leases, setLeases] = useState<LeasesDoc | null>(null);
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [leasesErr, setLeasesErr] = useState<string | null>(null);
  const [jobsErr, setJobsErr] = useState<string | null>(null);
  const [health, setHealth] = useState<AgentHealth | null>(null);
  const [loadErr, setLoadErr] = useState<string | null>(null);
  const [needToken, setNeedToken] = useState(false);
  const [version, setVersion] = useState(0);
  const dark = useDarkScheme();
  const route = useRoute();
  const view = viewOfRoute(route);
  const clusterRoutes = useClusterRoutes();

  const [fields, setFields] = useState<FieldsDoc | null>(null);
  const [fieldsErr, setFieldsErr] = useState<string | null>(null);
  const [alertsErr, setAlertsErr] = useState<string | null>(null);
  const [charted, setCharted] = useState<ChartMetric[]>(initialCharted);
  const metrics = useMemo(() => (fields ? chartMetrics(fields, charted) : []), [fields, charted]);
  // Handlers set up once at mount read the chart list through this ref.
  const metricsRef = useRef<MetricDef[]>([]);
  metricsRef.current = metrics;
  const chartedRef = useRef(charted);
  chartedRef.current = charted;
  // One store per charted metric, made when it is charted and dropped when it is not (only charted
  // metrics are fed from the live stream; charting one again seeds it from history).
  const stores = useMemo(() => new Map<ChartMetric, SeriesStore>(), []);
  const storeOf = (m: ChartMetric) => {
    let st = stores.get(m);
    if (!st) stores.set(m, (st = new SeriesStore()));
    return st;
  };
  const linkRef = useRef<LiveLink | null>(null);
  // Time of the first live sample of the current connection, and of the last live sample overall:
  // history is merged only before the first (so it never interleaves with live points), and after a
  // reconnect the gap between the two is filled from history.
  const liveFrom = useRef<number>(Infinity);
  const lastLive = useRef<number | null>(null);

  const bump = () => setVersion((v) => v + 1);
  const latestSnap = useRef<Snapshot | null>(null);
  const frame = useRef<number | null>(null);

  /** Merges the history since `since` of `list`'s metrics into their stores: points after `after` and
   *  before `before(metric)` (where the live points of that store begin). */
  const loadHistory = async (since: string, after: number, before: (m: ChartMetric) => number, list: MetricDef[] = metricsRef.current) => {
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
    bump();
  };

  // A failed read is shown in the Alerts panel and tried again in 5 s (one retry pending at a time).
  const alertsRetry = useRef<ReturnType<typeof setTimeout> | null>(null);
  const loadAlerts = (): Promise<void> =>
    api
      .alerts()
      .then((doc) => {
        setFiring(new Map(doc.firing.map((a) => [a.key, a])));
        setRecent(mergeRecent([], doc.recent));
        setAlertsErr(null);
      })
      .catch((e) => {
        setAlertsErr(`cannot read the alerts: ${errText(e)}; retrying`);
        if (alertsRetry.current === null)
          alertsRetry.current = setTimeout(() => {
            alertsRetry.current = null;
            void loadAlerts();
          }, 5000);
      });

  const onSnapshot = (s: Snapshot, initial: boolean) => {
    if (initial) {
      const gapFrom = lastLive.current;
      liveFrom.current = s.t;
      if (gapFrom !== null && s.t - gapFrom > 5000) {
        void loadHistory(String(Math.floor(gapFrom / 1000)), gapFrom, () => liveFrom.current);
      }
      if (gapFrom !== null) void loadAlerts(); // events may have been missed while disconnected
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
        setLoadErr(null);
        bump();
      });
  };

  const onAlert = (a: Alert) => {
    setFiring((prev) => {
      const next = new Map(prev);
      if (a.state === 'firing') next.set(a.key, a);
      else {
        next.delete(a.key);
        // A resolve without the firing alert's id: match it by rule and GPU.
        for (const [k, f] of next) if (f.rule === a.rule && f.gpuIndex === a.gpuIndex && f.gpuUuid === a.gpuUuid) next.delete(k);
      }
      return next;
    });
    setRecent((prev) => mergeRecent(prev, [a]));
  };

  // Live stream, history seed, alerts.
  useEffect(() => {
    const live = new LiveLink(
      {
        snapshot: onSnapshot,
        alert: onAlert,
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
    // The charts need the field table; the history seed follows it. A failure is shown and retried
    // (doubling, up to 15 s): without the table there are no charts.
    const loadFields = (attempt: number) =>
      api
        .fields()
        .then((doc) => {
          setFields(doc);
          setFieldsErr(null);
          void loadHistory('1h', -Infinity, () => liveFrom.current, chartMetrics(doc, chartedRef.current));
        })
        .catch((e) => {
          setFieldsErr(`cannot read the metric list (/api/v1/fields): ${errText(e)}; retrying`);
          setTimeout(() => void loadFields(attempt + 1), Math.min(15_000, 1000 * 2 ** attempt));
        });
    void loadFields(0);
    void loadAlerts();
    // Show something at once even if the socket is slow or blocked by a proxy.
    api
      .snapshot()
      .then((s) => setSnap((cur) => cur ?? s))
      .catch((e) => {
        if (e instanceof ApiError && e.status === 401) setNeedToken(true);
        setLoadErr(`cannot read from the agent: ${errText(e)}`);
      });
    return () => live.stop();
    // Handlers only touch refs and state setters; the link lives as long as the page.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const refreshJobs = useCallback(() => {
    api.jobs().then((j) => (setJobs(j), setJobsErr(null)), (e) => setJobsErr(errText(e)));
  }, []);
  // Leases, jobs and the agent's health, every ~10 s.
  useEffect(() => {
    const poll = () => {
      api.leases().then((l) => (setLeases(l), setLeasesErr(null)), (e) => setLeasesErr(errText(e)));
      api.jobs().then((j) => (setJobs(j), setJobsErr(null)), (e) => setJobsErr(errText(e)));
      api.health().then(setHealth, () => setHealth(null));
    };
    poll();
    const t = setInterval(poll, POLL_MS);
    return () => clearInterval(t);
  }, []);

  const choosePeriod = (ms: number) => {
    setPeriodMs(ms);
    localStorage.setItem(PERIOD_KEY, String(ms));
    linkRef.current?.setPeriod(ms);
  };

  /** Charts `next` (history metric names) from now on, and remembers it. */
  const chooseCharted = (next: ChartMetric[]) => {
    const added = next.filter((m) => !charted.includes(m));
    for (const m of charted) if (!next.includes(m)) stores.delete(m);
    setCharted(next);
    localStorage.setItem(CHARTED_KEY, JSON.stringify(next));
    // A newly charted metric: its hour of history, up to its first live point.
    if (fields && added.length)
      void loadHistory('1h', -Infinity, (m) => stores.get(m)?.firstT ?? Infinity, chartMetrics(fields, added));
  };

  const gpus = snap?.gpus ?? [];
  // The same array while the GPU set stays the same: the charts compare it to decide on their shape.
  const chartGpusKey = useMemo(() => {
    const set = new Set<number>(gpus.map((g) => g.index));
    for (const s of stores.values()) for (const g of s.gpus) set.add(g);
    return [...set].sort((a, b) => a - b).join(',');
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version]);
  const chartGpus = useMemo(() => (chartGpusKey ? chartGpusKey.split(',').map(Number) : []), [chartGpusKey]);
  const band = chartGpus.length > LINES_MAX_GPUS;
  const linesQuery = view === 'node' ? route.query.get('lines') : null;
  const picked = useMemo(() => parseLines(linesQuery), [linesQuery]);
  /** Picks (or unpicks) a GPU for a line of its own in the band charts; the pick is in the URL. */
  const toggleLine = (index: number) => {
    const next = picked.includes(index) ? picked.filter((g) => g !== index) : [...picked, index].sort((a, b) => a - b);
    navigate(href([], { lines: next.length ? next.join(',') : undefined }), true);
  };
  const firingList = useMemo(() => [...firing.values()].sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0)), [firing]);
  // The panels below the charts say "5s ago": whole seconds are enough. They are built again only when
  // their data or that second changes, not on every live update (with 64 GPUs, diffing them each time was
  // a large part of an update's script).
  const now = Math.floor(Date.now() / 1000) * 1000;
  const processKey = processSignature(gpus);
  const processesEl = useMemo(
    () => <Processes gpus={gpus} visibilityMessage={snap?.processVisibilityMessage ?? null} />,
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [processKey, snap?.processVisibilityMessage],
  );
  const alertsEl = useMemo(() => <Alerts firing={firingList} recent={recent} now={now} error={alertsErr} />, [firingList, recent, now, alertsErr]);
  const leasesEl = useMemo(() => <Leases doc={leases} error={leasesErr} now={now} />, [leases, leasesErr, now]);
  const jobsEl = useMemo(() => <Jobs jobs={jobs} error={jobsErr} now={now} />, [jobs, jobsErr, now]);
  const submitEl = useMemo(() => <SubmitJob jobs={jobs} onChange={refreshJobs} />, [jobs, refreshJobs]);
  // chooseCharted reads only fields and charted: the element made with them stays right until they change.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const pickerEl = useMemo(() => fields && <ChartPicker fields={fields} charted={charted} onChange={chooseCharted} />, [fields, charted]);

  return (
    <>
      <Header
        snap={snap}
        link={link}
        retryInMs={retryIn}
        alertsFiring={firing.size}
        health={health?.status ?? null}
        periodMs={periodMs}
        onPeriod={choosePeriod}
      />
      <ViewTabs view={view} clusterRoutes={clusterRoutes} />
      {view === 'cluster' && <ClusterView />}
      {view === 'experiments' && <ExperimentsView route={route} dark={dark} fields={fields} />}
      {view === 'gpu' && <GpuPage route={route} snap={snap} fields={fields} dark={dark} />}
      {view === 'node' && (
      <main>
        {loadErr && link !== 'live' && <p class="banner error">{loadErr}</p>}
        {needToken && (
          <form
            class="banner token"
            onSubmit={(e) => {
              e.preventDefault();
              auth.set(new FormData(e.currentTarget as HTMLFormElement).get('token') as string);
              location.reload();
            }}
          >
            <label>
              This agent wants its bearer token for reads (--auth-read):{' '}
              <input name="token" type="password" autocomplete="off" placeholder="contents of the agent's token file" />
            </label>{' '}
            <button type="submit">use token</button>
          </form>
        )}
        {health?.status === 'degraded' && health.problems.length > 0 && (
          <ul class="banner warnings" id="agent-problems">
            {health.problems.map((p) => (
              <li>agent: {p}</li>
            ))}
          </ul>
        )}
        {snap && snap.warnings.length > 0 && (
          <ul class="banner warnings">
            {snap.warnings.map((w) => (
              <li>{w}</li>
            ))}
          </ul>
        )}
        <section id="gpus" class="gpu-grid" aria-label="GPUs">
          {snap === null ? (
            <p class="empty">Waiting for the first sample…</p>
          ) : gpus.length === 0 ? (
            <p class="empty">No GPUs reported by the {snap.backend ?? ''} backend.</p>
          ) : (
            gpus.map((g) => (
              <GpuCard
                key={g.uuid ?? g.index}
                gpu={g}
                fields={fields}
                charted={band ? picked.includes(g.index) : null}
                onChartToggle={toggleLine}
              />
            ))
          )}
        </section>
        {fieldsErr && <p class="banner error">{fieldsErr}</p>}
        <div class="charts-head">
          <h2 class="charts-title">Last hour</h2>
          {pickerEl}
          {band && (
            <p class="muted charts-note" id="band-note">
              {chartGpus.length} GPUs: each chart draws the range across all of them (band), their mean, and a line for{' '}
              {picked.length ? (
                <>
                  the GPUs picked on their cards ({picked.join(', ')}) · <a href={href([])}>clear</a>
                </>
              ) : (
                <>the {BAND_TOP} highest (pick others with ◉ on a card)</>
              )}
              ; every GPU's own history is on its page.
            </p>
          )}
        </div>
        <section id="charts" class="charts" aria-label="last hour">
          {metrics.map((m) => (
            <Chart
              key={m.metric}
              id={`chart-${m.metric}`}
              title={m.title}
              unit={m.unit}
              store={storeOf(m.metric)}
              version={version}
              gpus={chartGpus}
              picked={picked}
              yMax={m.yMax}
              fmtValue={m.fmt}
              dark={dark}
            />
          ))}
        </section>
        <div class="two-col">
          {processesEl}
          {alertsEl}
        </div>
        <div class="two-col">
          {leasesEl}
          {jobsEl}
        </div>
        {submitEl}
      </main>
      )}
      <footer class="foot">
        gpufleet agent dashboard · {view === 'node' ? 'charts show the last hour · ' : ''}{snap ? `last sample ${fmtClock(snap.t)}` : ''}
      </footer>
    </>
  );
}
