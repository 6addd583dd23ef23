// The experiments pages: `#/experiments` (recorded runs, newest first, paged and filtered on the server,
// the filters in the URL; filtered to one task, that task's totals head the list), `#/experiments?view=tasks`
// (each task grid under its heading with its totals and its newest runs) and `#/experiments/ID` (one run:
// the seed's GPU Monitoring section, energy, p95, lease, efficiency). "Experiments" is the seeds' word for
// the pages; what they read are jobs (GET /api/v1/jobs, /api/v1/jobs/{id}, /api/v1/tasks). Labels and units
// of the metrics come from the agent's field table (GET /api/v1/fields).
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, type FieldsDoc } from '../api';
import {
  efficiency,
  expApi,
  modelLabel,
  PAGE_SIZE,
  RUN_METRICS,
  RUNS_PER_TASK,
  runMetricMeta,
  STATUSES,
  TASKS_PER_PAGE,
  type Experiment,
  type ListQuery,
  type MetricStat,
  type RunMetric,
  type RunSeries,
  type TaskTotals,
} from '../experiments';
import { fmtDuration, fmtNum, fmtTime, gpuColor, NA } from '../format';
import { href, navigate, type Route } from '../router';
import { ErrorBoundary } from './ErrorBoundary';

const RETRY_MS = 5000;

/** Loads with `load` whenever `key` changes; a failure shows its message and retries every 5 s; poll: the
 *  reload period a loaded value asks for (a running job's), none: load once. */
function useLoad<T>(key: string, load: (signal: AbortSignal) => Promise<T>, poll?: (value: T) => number | undefined) {
  const [data, setData] = useState<{ key: string; value: T } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    let timer: number | undefined;
    load(ctl.signal).then(
      (value) => {
        setData({ key, value });
        setError(null);
        const ms = poll?.(value);
        if (ms) timer = window.setTimeout(() => setTick((n) => n + 1), ms);
      },
      (e: unknown) => {
        if (ctl.signal.aborted) return;
        setError(e instanceof Error ? e.message : String(e));
        timer = window.setTimeout(() => setTick((n) => n + 1), RETRY_MS);
      },
    );
    return () => {
      ctl.abort();
      window.clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, tick]);
  return { data: data && data.key === key ? data.value : null, stale: data?.value ?? null, error, retry: () => setTick((n) => n + 1) };
}

function LoadError({ error, retry }: { error: string; retry: () => void }) {
  return (
    <p class="error load-error" role="alert">
      Could not load: {error}. Retrying every {RETRY_MS / 1000} s.{' '}
      <button type="button" onClick={retry}>
        Retry now
      </button>
    </p>
  );
}

interface ViewProps {
  route: Route;
  dark: boolean;
  fields: FieldsDoc | null;
}

/** A render error below shows in place of the view (the header and tabs stay), with "try again". */
export function ExperimentsView(props: ViewProps) {
  return (
    <main id="experiments" class="experiments">
      <ErrorBoundary what="The experiments view">
        <ExperimentsBody {...props} />
      </ErrorBoundary>
    </main>
  );
}

function ExperimentsBody({ route, dark, fields }: ViewProps) {
  const id = route.path[1];
  return id ? <Detail id={id} dark={dark} fields={fields} /> : route.query.get('view') === 'tasks' ? <Tasks route={route} /> : <List route={route} />;
}

// ---------------------------------------------------------------------------------------------------
// The list

function queryOf(route: Route): ListQuery {
  const page = Number(route.query.get('page') ?? '1');
  return {
    status: route.query.get('status') ?? undefined,
    user: route.query.get('user') ?? undefined,
    task: route.query.get('task') ?? undefined,
    page: Number.isInteger(page) && page > 0 ? page : 1,
  };
}

function listHref(q: ListQuery): string {
  return href(['experiments'], { status: q.status, user: q.user, task: q.task, page: q.page > 1 ? q.page : undefined });
}

function tasksHref(q: ListQuery): string {
  return href(['experiments'], { view: 'tasks', user: q.user, task: q.task, page: q.page > 1 ? q.page : undefined });
}

const ownerOf = (t: { user: string | null; uid: number | null }) => t.user ?? (t.uid !== null ? `uid ${t.uid}` : NA);

/** The seed's GPU column: "2 (H100 80GB HBM3) 📊", or "N/A" for a run without GPUs. */
export function GpuCell({ e }: { e: Experiment }) {
  if (e.gpuCount <= 0) return <td class="gpu-col nowrap">N/A</td>;
  const model = modelLabel(e.gpuModel);
  return (
    <td class="gpu-col nowrap" title={e.gpuModel ?? ''}>
      {e.gpuCount}
      {model && ` (${model})`}
      {e.hasMonitoring && (
        <span class="mon-mark" title="GPU monitoring data available" aria-label="GPU monitoring data available">
          {' '}
          📊
        </span>
      )}
    </td>
  );
}

function StatusBadge({ status }: { status: string | null }) {
  return <span class={`badge job ${status ?? 'unknown'}`}>{status ?? NA}</span>;
}

function Filters({ q, grouped }: { q: ListQuery; grouped: boolean }) {
  const [user, setUser] = useState(q.user ?? '');
  const [task, setTask] = useState(q.task ?? '');
  useEffect(() => setUser(q.user ?? ''), [q.user]);
  useEffect(() => setTask(q.task ?? ''), [q.task]);
  const apply = (next: Partial<ListQuery>) => {
    const to = { ...q, ...next, page: 1 };
    navigate(grouped ? tasksHref(to) : listHref(to));
  };
  return (
    <form
      class="exp-filters"
      onSubmit={(ev) => {
        ev.preventDefault();
        apply({ user: user.trim() || undefined, task: task.trim() || undefined });
      }}
    >
      {!grouped && (
        <label>
          status{' '}
          <select id="filter-status" value={q.status ?? ''} onChange={(ev) => apply({ status: (ev.target as HTMLSelectElement).value || undefined })}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option value={s} key={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      )}
      <label>
        user <input id="filter-user" value={user} maxLength={64} onInput={(ev) => setUser((ev.target as HTMLInputElement).value)} />
      </label>
      <label>
        task <input id="filter-task" value={task} maxLength={200} onInput={(ev) => setTask((ev.target as HTMLInputElement).value)} />
      </label>
      <button type="submit">Filter</button>
      <span class="exp-views">
        {grouped ? <a href={href(['experiments'])}>all runs</a> : <strong>all runs</strong>} ·{' '}
        {grouped ? <strong>by task</strong> : <a href={href(['experiments'], { view: 'tasks' })}>by task</a>}
      </span>
    </form>
  );
}

function Pager({ page, total, to, perPage = PAGE_SIZE }: { page: number; total: number; to: (page: number) => string; perPage?: number }) {
  const pages = Math.max(1, Math.ceil(total / perPage));
  return (
    <nav class="pager" aria-label="pages">
      {page > 1 ? (
        <a id="page-prev" href={to(page - 1)}>
          ← newer
        </a>
      ) : (
        <span class="muted">← newer</span>
      )}
      <span class="muted">
        page {page} of {pages} ({total} in all)
      </span>
      {page < pages ? (
        <a id="page-next" href={to(page + 1)}>
          older →
        </a>
      ) : (
        <span class="muted">older →</span>
      )}
    </nav>
  );
}

/** Runs as table rows: id/name, task, status, user, start, duration, exit, command, the GPU column. */
function RunsTable({ jobs, id }: { jobs: Experiment[]; id?: string }) {
  return (
    <div class="table-wrap">
      <table id={id} class="exp-table">
        <thead>
          <tr>
            <th>id / name</th>
            <th>task</th>
            <th>status</th>
            <th>user</th>
            <th>start</th>
            <th>duration</th>
            <th class="num">exit</th>
            <th>command</th>
            <th>GPUs</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((e) => (
            <tr key={e.id} data-id={e.id}>
              <td>
                <a class="mono" href={href(['experiments', e.id])}>
                  {e.id}
                </a>
                {e.name && <div class="muted">{e.name}</div>}
              </td>
              <td>{e.task ? <a href={listHref({ page: 1, task: e.task })}>{e.task}</a> : <span class="muted">—</span>}</td>
              <td class="nowrap">
                <StatusBadge status={e.status} />
              </td>
              <td>{e.user ?? (e.uid !== null ? `uid ${e.uid}` : NA)}</td>
              <td class="nowrap" title={e.startedAt !== null ? new Date(e.startedAt).toISOString() : ''}>
                {fmtTime(e.startedAt)}
              </td>
              <td class="nowrap">{e.endedAt === null ? (e.status === 'running' ? 'running' : NA) : fmtDuration(e.startedAt, e.endedAt)}</td>
              <td class="num">{e.exitCode ?? NA}</td>
              <td class="command" title={e.command ?? ''}>
                {e.command ?? NA}
              </td>
              <GpuCell e={e} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A task's totals over all its runs (from the store, not from a page of them). */
function TaskTotalsLine({ t }: { t: TaskTotals }) {
  const item = (k: string, v: string, label: string) => (
    <span class="task-total" data-k={k}>
      <strong>{v}</strong> {label}
    </span>
  );
  return (
    <p class="task-totals">
      {item('runs', String(t.runs), t.runs === 1 ? 'run' : 'runs')} · {item('succeeded', String(t.succeeded), 'succeeded')} ·{' '}
      {item('failed', String(t.failed), 'failed')}
      {t.running > 0 && <> · {item('running', String(t.running), 'running')}</>} · {item('gpu-hours', fmtNum(t.gpuHours, 2), 'GPU-hours')}
      {t.lastStartedAt !== null && <span class="muted"> · last started {fmtTime(t.lastStartedAt)}</span>}
    </p>
  );
}

function List({ route }: { route: Route }) {
  const q = queryOf(route);
  const { data, stale, error, retry } = useLoad(listHref(q), (s) => expApi.page(q, s));
  const page = data ?? stale;
  // Filtered to one task: its totals head the list (one row per owner of a task of that name).
  const totals = useLoad(q.task ? `totals:${q.task}:${q.user ?? ''}` : 'none', (s) =>
    q.task ? expApi.tasks({ task: q.task, user: q.user, page: 1, limit: 20 }, s) : Promise.resolve(null),
  );
  return (
    <section class="panel" id="exp-list">
      <h2>
        Experiments {page && <span class="count">{page.total}</span>}
      </h2>
      <Filters q={q} grouped={false} />
      {q.task && totals.data && totals.data.tasks.length > 0 && (
        <div id="list-task-totals" class="task-head">
          {totals.data.tasks.map((t) => (
            <div key={`${t.uid ?? ''}\u0000${t.user ?? ''}`} data-task={t.task}>
              <h3>
                {t.task} <span class="muted">· {ownerOf(t)}</span>
              </h3>
              <TaskTotalsLine t={t} />
            </div>
          ))}
        </div>
      )}
      {error && <LoadError error={error} retry={retry} />}
      {page === null ? (
        !error && <p class="empty">Loading…</p>
      ) : page.jobs.length === 0 ? (
        <p class="empty">No runs match.</p>
      ) : (
        <RunsTable jobs={page.jobs} id="exp-table" />
      )}
      {page && <Pager page={q.page} total={page.total} to={(p) => listHref({ ...q, page: p })} />}
    </section>
  );
}

// ---------------------------------------------------------------------------------------------------
// Grouped by task

/** One task grid: its heading and totals, and its newest runs (all of them through the filtered list). */
function TaskGroup({ t }: { t: TaskTotals }) {
  const runsOf: ListQuery = { task: t.task, user: t.user ?? undefined, uid: t.uid ?? undefined, page: 1, limit: RUNS_PER_TASK };
  const key = `group:${t.task}:${t.uid ?? ''}:${t.user ?? ''}:${t.runs}:${t.lastStartedAt ?? ''}`;
  const { data, stale, error, retry } = useLoad(key, (s) => expApi.page(runsOf, s));
  const page = data ?? stale;
  const all = listHref({ task: t.task, user: t.user ?? undefined, page: 1 });
  return (
    <section class="task-group" data-task={t.task} data-user={t.user ?? ''}>
      <h3>
        <a href={all}>{t.task}</a> <span class="muted">· {ownerOf(t)}</span>
      </h3>
      <TaskTotalsLine t={t} />
      {error && <LoadError error={error} retry={retry} />}
      {page === null ? (
        !error && <p class="empty">Loading…</p>
      ) : (
        <>
          <RunsTable jobs={page.jobs} />
          {page.total > page.jobs.length && (
            <p class="more">
              <a href={all}>all {page.total} runs of {t.task} →</a>
            </p>
          )}
        </>
      )}
    </section>
  );
}

function Tasks({ route }: { route: Route }) {
  const q = queryOf(route);
  const key = tasksHref(q);
  const { data, stale, error, retry } = useLoad(key, (s) => expApi.tasks({ user: q.user, task: q.task, page: q.page }, s));
  const doc = data ?? stale;
  return (
    <section class="panel" id="exp-tasks">
      <h2>Experiments by task {doc && <span class="count">{doc.total}</span>}</h2>
      <Filters q={q} grouped={true} />
      {error && <LoadError error={error} retry={retry} />}
      {doc === null ? (
        !error && <p class="empty">Loading…</p>
      ) : doc.tasks.length === 0 ? (
        <p class="empty">
          No task runs recorded (<code>gpufleet task run TASK.json -- CMD</code>).
        </p>
      ) : (
        <div id="task-groups">
          {doc.tasks.map((t) => (
            <TaskGroup key={`${t.task}\u0000${t.uid ?? ''}\u0000${t.user ?? ''}`} t={t} />
          ))}
        </div>
      )}
      {doc && <Pager page={q.page} total={doc.total} perPage={TASKS_PER_PAGE} to={(p) => tasksHref({ ...q, page: p })} />}
    </section>
  );
}

// ---------------------------------------------------------------------------------------------------
// One run

const fmt1 = (v: number | null) => fmtNum(v, 1);

function StatCell({ s, unit, metric, gpu }: { s: MetricStat; unit: string; metric: string; gpu: number }) {
  return (
    <td class="num stat" data-gpu={gpu} data-metric={metric}>
      <span class="mean">{fmt1(s.mean)}</span>
      {s.mean !== null && unit}
      <div class="range muted">
        {fmt1(s.min)}–{fmt1(s.max)}
      </div>
      <div class="p95 muted">p95 {fmt1(s.p95)}</div>
    </td>
  );
}

/** While a run is going its record has no samples yet: the node's history of the leased GPUs since its
 *  start (the history metrics of the run metrics' fields). */
async function liveSeries(e: Experiment, fields: FieldsDoc | null, signal: AbortSignal): Promise<RunSeries[]> {
  const leases = await api.leases(signal);
  const lease = leases.leases.find((l) => l.id === e.leaseId || l.jobId === e.id);
  const gpus = lease?.gpus ?? e.gpuIndices;
  if (!gpus.length || e.startedAt === null) return [];
  const since = String(Math.floor(e.startedAt / 1000));
  const metricOf = (id: RunMetric['id']) => runMetricMeta(RUN_METRICS.find((m) => m.id === id)!, fields).historyMetric;
  const read = (id: RunMetric['id']) => {
    const m = metricOf(id);
    return m ? api.history(m, since, signal) : Promise.resolve(null);
  };
  const [util, mem, temp, power, snap] = await Promise.all([read('utilization'), read('memory'), read('temperature'), read('power'), api.snapshot(signal)]);
  const points = (doc: typeof util, g: number) => doc?.series.find((s) => s.gpu === g)?.points ?? [];
  return gpus.map((g) => {
    // The time axis: the first metric the agent keeps.
    const pts = [util, mem, temp, power].map((d) => points(d, g)).find((p) => p.length) ?? [];
    const at = (doc: typeof util) => new Map(points(doc, g).map((p) => [p.t, p.v]));
    const u = at(util);
    const m = at(mem);
    const tc = at(temp);
    const pw = at(power);
    const total = snap.gpus.find((x) => x.index === g)?.memoryTotalMib ?? null;
    return {
      index: g,
      t: pts.map((p) => p.t / 1000),
      utilization: pts.map((p) => u.get(p.t) ?? null),
      memoryPct: pts.map((p) => {
        const v = m.get(p.t) ?? null;
        return v === null || !total ? null : (v / total) * 100;
      }),
      temperature: pts.map((p) => tc.get(p.t) ?? null),
      power: pts.map((p) => pw.get(p.t) ?? null),
    };
  });
}

function Detail({ id, dark, fields }: { id: string; dark: boolean; fields: FieldsDoc | null }) {
  const { data, error, retry } = useLoad(
    `detail:${id}`,
    async (s) => {
      const e = await expApi.one(id, s);
      const live = e.status === 'running' && e.series.length === 0 ? await liveSeries(e, fields, s) : null;
      return { e, live };
    },
    (v) => (v.e.status === 'running' || v.e.status === 'waiting' ? 3000 : undefined),
  );
  // Only this run's record: another run's, still on screen while this one loads, would mislead.
  const doc = data;
  const e = doc?.e ?? null;
  return (
    <>
      <p class="crumbs">
        <a href={href(['experiments'])}>← Experiments</a>
      </p>
      {error && <LoadError error={error} retry={retry} />}
      {e === null ? (
        !error && <p class="empty">Loading…</p>
      ) : (
        <ExperimentDetail e={e} live={doc?.live ?? null} dark={dark} fields={fields} />
      )}
    </>
  );
}

/** The summary box's durations: the seed's (how long the GPUs were monitored) and, when it differs, the job's. */
function Durations({ e }: { e: Experiment }) {
  const s = (v: number) => `${fmtNum(v, 1)} s`;
  const mon = e.monitoringS;
  const job = e.durationS;
  if (mon === null)
    return (
      <div>
        <span class="muted">duration</span> <strong id="sum-duration">{job !== null ? s(job) : 'running'}</strong>
      </div>
    );
  if (job === null || s(job) === s(mon))
    return (
      <div>
        <span class="muted">duration</span> <strong id="sum-duration">{s(mon)}</strong>
      </div>
    );
  return (
    <>
      <div>
        <span class="muted">monitoring duration</span> <strong id="sum-duration">{s(mon)}</strong>
      </div>
      <div>
        <span class="muted">job duration</span> <strong id="sum-job-duration">{s(job)}</strong>
      </div>
    </>
  );
}

const pick: Record<RunMetric['id'], (s: RunSeries) => (number | null)[]> = {
  utilization: (s) => s.utilization,
  memory: (s) => s.memoryPct,
  temperature: (s) => s.temperature,
  power: (s) => s.power,
};

const statOf: Record<RunMetric['id'], (g: Experiment['stats'][number]) => MetricStat> = {
  utilization: (g) => g.utilization,
  memory: (g) => g.memoryPct,
  temperature: (g) => g.temperature,
  power: (g) => g.power,
};

const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function ExperimentDetail({ e, live, dark, fields }: { e: Experiment; live: RunSeries[] | null; dark: boolean; fields: FieldsDoc | null }) {
  const metrics = RUN_METRICS.map((m) => ({ m, ...runMetricMeta(m, fields) }));
  // Energy is shown in Wh (the record and the driver count J and mJ).
  const energyLabel = fields?.fields.find((f) => f.key === 'energy_consumption_mj')?.label ?? 'energy';
  const eff = efficiency(e);
  const series = live ?? e.series;
  const energy = e.stats.map((g) => g.energyWh).filter((v): v is number => v !== null);
  const idle = eff?.meanUtil !== null && eff?.meanUtil !== undefined && eff.meanUtil < 10;
  return (
    <section class="panel" id="exp-detail" data-id={e.id}>
      <h2>
        {e.name ?? e.id} <StatusBadge status={e.status} />
      </h2>
      <dl class="exp-meta">
        <dt>job</dt>
        <dd class="mono">{e.id}</dd>
        <dt>task</dt>
        <dd>{e.task ?? '—'}</dd>
        <dt>user</dt>
        <dd>{e.user ?? (e.uid !== null ? `uid ${e.uid}` : NA)}</dd>
        <dt>command</dt>
        <dd class="mono wrap">{e.command ?? NA}</dd>
        <dt>started</dt>
        <dd>{e.startedAt !== null ? new Date(e.startedAt).toISOString() : NA}</dd>
        <dt>exit status</dt>
        <dd>{e.exitCode ?? NA}</dd>
        {e.error && (
          <>
            <dt>error</dt>
            <dd class="error">{e.error}</dd>
          </>
        )}
      </dl>

      <h3>Lease</h3>
      <dl class="exp-meta" id="exp-lease">
        <dt>GPUs</dt>
        <dd id="lease-gpus">
          {e.gpuCount > 0 ? `${e.gpuCount} × ${modelLabel(e.gpuModel) ?? NA} (${e.gpuIndices.join(', ') || NA})` : 'N/A (no GPUs)'}
        </dd>
        <dt>CUDA_VISIBLE_DEVICES</dt>
        <dd class="mono" id="lease-cvd">
          {e.cudaVisibleDevices ?? NA}
        </dd>
        <dt>chosen by</dt>
        <dd id="lease-method">
          {e.allocationMethod ?? NA}
          {e.allocationWhy && <div class="muted">{e.allocationWhy}</div>}
        </dd>
        <dt>lease</dt>
        <dd class="mono">{e.leaseId ?? NA}</dd>
      </dl>

      {eff && (
        <p id="efficiency" class={`efficiency${idle ? ' idle' : ''}`}>
          <strong>{fmtNum(eff.gpuHours, 3)} GPU-h held</strong> at{' '}
          <strong>{eff.meanUtil === null ? NA : `${fmtNum(eff.meanUtil, 1)} %`}</strong> mean utilization of the GPUs held
          {eff.usedGpuHours !== null && <> — about {fmtNum(eff.usedGpuHours, 3)} GPU-h of work</>}
          {idle && <> · mostly idle</>}
        </p>
      )}

      <h3>GPU monitoring</h3>
      {!e.hasMonitoring && !live ? (
        <p class="empty" id="no-monitoring">
          {e.status === 'running' ? 'Collecting samples…' : 'This run has no GPU monitoring data.'}
        </p>
      ) : (
        <>
          <div class="summary-box" id="exp-summary">
            <Durations e={e} />
            <div>
              <span class="muted">samples</span> <strong id="sum-samples">{e.sampleCount ?? (live ? live[0]?.t.length ?? 0 : NA)}</strong>
            </div>
            <div>
              <span class="muted">{energyLabel}</span>{' '}
              <strong id="sum-energy">{energy.length ? `${fmtNum(energy.reduce((a, b) => a + b, 0), 2)} Wh` : NA}</strong>
            </div>
          </div>
          {e.stats.length > 0 && (
            <div class="table-wrap">
              <table id="exp-stats">
                <thead>
                  <tr>
                    <th>GPU ID</th>
                    <th>model</th>
                    {metrics.map(({ m, label, unit }) => (
                      <th class="num" key={m.id} data-metric={m.id}>
                        {label} {unit}
                      </th>
                    ))}
                    <th class="num">{energyLabel} Wh</th>
                  </tr>
                </thead>
                <tbody>
                  {e.stats.map((g) => (
                    <tr key={g.index} data-gpu={g.index}>
                      <td>{g.index}</td>
                      <td title={g.uuid ?? ''}>{modelLabel(g.name) ?? NA}</td>
                      {metrics.map(({ m }) => (
                        <StatCell key={m.id} s={statOf[m.id](g)} unit="" metric={m.id} gpu={g.index} />
                      ))}
                      <td class="num energy" data-gpu={g.index} title={g.energyFromSeries ? 'integrated from the power samples' : 'from the driver'}>
                        {fmtNum(g.energyWh, 2)}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {e.seriesOmitted && <p class="note">Samples not kept: {e.seriesOmitted}.</p>}
          {series.length > 0 && (
            <div class="exp-charts">
              {metrics.map(({ m, label, unit }) => (
                <RunChart key={m.id} id={`chart-${m.id}`} title={capital(label)} unit={unit} series={series} pick={pick[m.id]} yMax={m.yMax} dark={dark} />
              ))}
            </div>
          )}
        </>
      )}
    </section>
  );
}

/** The GPUs' samples on one time axis (the sampler reads every GPU at once; a missing reading is a gap). */
function aligned(series: RunSeries[], pick: (s: RunSeries) => (number | null)[]): uPlot.AlignedData {
  const xs = [...new Set(series.flatMap((s) => s.t))].sort((a, b) => a - b);
  const pos = new Map(xs.map((x, i) => [x, i]));
  const cols = series.map((s) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    const v = pick(s);
    s.t.forEach((t, i) => (col[pos.get(t) ?? 0] = v[i] ?? null));
    return col;
  });
  return [xs, ...cols] as uPlot.AlignedData;
}

const HEIGHT = 180;

function RunChart({
  id,
  title,
  unit,
  series,
  pick,
  yMax,
  dark,
}: {
  id: string;
  title: string;
  unit: string;
  series: RunSeries[];
  pick: (s: RunSeries) => (number | null)[];
  yMax?: number;
  dark: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.index).join(',');
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = (n: string) => getComputedStyle(document.documentElement).getPropertyValue(n).trim() || '#888';
    const grid = { stroke: css('--grid'), width: 1 };
    const u = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height: HEIGHT,
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: yMax !== undefined ? { range: [0, yMax] } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        axes: [
          { stroke: css('--muted'), grid, ticks: grid },
          { stroke: css('--muted'), grid, ticks: grid, size: 56 },
        ],
        series: [{ label: 'time' }, ...series.map((s) => ({ label: `GPU ${s.index}`, stroke: gpuColor(s.index), width: 1.5, points: { show: false } }))],
      },
      aligned(series, pick),
      el,
    );
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: HEIGHT }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, dark, yMax]);
  // New samples of a running job go in without rebuilding the chart.
  const data = aligned(series, pick);
  useEffect(() => {
    plot.current?.setData(data);
  });
  return (
    <figure class="chart">
      <figcaption>
        {title} <span class="unit">{unit}</span>
      </figcaption>
      <div class="chart-plot" id={id} ref={box} data-series={series.length} data-points={data[0].length} />
    </figure>
  );
}
