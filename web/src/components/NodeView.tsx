// This node's view (`#/`, `?lines=3,7` picks GPUs for a line of their own in band charts): the GPU cards,
// the last hour's live charts, and the processes, alerts, leases and jobs panels.
import { useMemo } from 'preact/hooks';
import { auth, type AgentHealth, type FieldsDoc, type Gpu, type Job, type LeasesDoc, type Snapshot } from '../api';
import { parseLines } from '../charts';
import { href, navigate, type Route } from '../router';
import type { Alerts as AlertsState } from '../useAlerts';
import type { Live } from '../useLive';
import type { Resource } from '../useResource';
import { Alerts } from './Alerts';
import { BAND_TOP, Chart, LINES_MAX_GPUS } from './Chart';
import { ChartPicker } from './ChartPicker';
import { GpuCard } from './GpuCard';
import { Processes } from './Processes';
import { SubmitJob } from './SubmitJob';
import { Jobs, Leases } from './Work';

export interface NodeViewProps {
  route: Route;
  dark: boolean;
  live: Live;
  snap: Snapshot | null;
  fields: Resource<FieldsDoc>;
  alerts: AlertsState;
  leases: Resource<LeasesDoc>;
  jobs: Resource<Job[]>;
  health: AgentHealth | null;
  /** The first snapshot's failure, while there is no live one. */
  loadErr: string | null;
  needToken: boolean;
}

/** What the processes table shows, as a string: it is rebuilt only when this changes. */
function processSignature(gpus: Gpu[]): string {
  let s = '';
  for (const g of gpus)
    for (const p of g.processes) s += `${g.index}/${p.pid}/${p.memoryMib}/${p.name}/${p.user}/${p.container}/${p.command}/${p.migProfile}\n`;
  return s;
}

function Banners({ snap, health, loadErr, needToken }: Pick<NodeViewProps, 'snap' | 'health' | 'loadErr' | 'needToken'>) {
  return (
    <>
      {loadErr && <p class="banner error">{loadErr}</p>}
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
    </>
  );
}

interface ChartsProps {
  live: Live;
  fields: FieldsDoc | null;
  dark: boolean;
  gpus: number[];
  picked: number[];
}

/** The last hour of the charted metrics, with the picker and, above LINES_MAX_GPUS GPUs, what a band means. */
function LiveCharts({ live, fields, dark, gpus, picked }: ChartsProps) {
  // chooseCharted reads only fields and charted: the element made with them stays right until they change.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const pickerEl = useMemo(() => fields && <ChartPicker fields={fields} charted={live.charted} onChange={live.chooseCharted} />, [fields, live.charted]);
  const band = gpus.length > LINES_MAX_GPUS;
  return (
    <>
      <div class="charts-head">
        <h2 class="charts-title">Last hour</h2>
        {pickerEl}
        {band && (
          <p class="muted charts-note" id="band-note">
            {gpus.length} GPUs: each chart draws the range across all of them (band), their mean, and a line for{' '}
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
        {live.metrics.map((m) => (
          <Chart
            key={m.metric}
            id={`chart-${m.metric}`}
            title={m.title}
            unit={m.unit}
            store={live.storeOf(m.metric)}
            version={live.version}
            gpus={gpus}
            picked={picked}
            yMax={m.yMax}
            fmtValue={m.fmt}
            dark={dark}
          />
        ))}
      </section>
    </>
  );
}

export function NodeView(props: NodeViewProps) {
  const { route, dark, live, snap, fields, alerts, leases, jobs } = props;
  const gpus = snap?.gpus ?? [];
  // The same array while the GPU set stays the same: the charts compare it to decide on their shape.
  const chartGpusKey = useMemo(() => {
    const set = new Set<number>(gpus.map((g) => g.index));
    for (const s of live.stores.values()) for (const g of s.gpus) set.add(g);
    return [...set].sort((a, b) => a - b).join(',');
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live.version]);
  const chartGpus = useMemo(() => (chartGpusKey ? chartGpusKey.split(',').map(Number) : []), [chartGpusKey]);
  const band = chartGpus.length > LINES_MAX_GPUS;
  const linesQuery = route.query.get('lines');
  const picked = useMemo(() => parseLines(linesQuery), [linesQuery]);
  /** Picks (or unpicks) a GPU for a line of its own in the band charts; the pick is in the URL. */
  const toggleLine = (index: number) => {
    const next = picked.includes(index) ? picked.filter((g) => g !== index) : [...picked, index].sort((a, b) => a - b);
    navigate(href([], { lines: next.length ? next.join(',') : undefined }), true);
  };
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
  const alertsEl = useMemo(
    () => <Alerts firing={alerts.firing} recent={alerts.recent} now={now} error={alerts.error} />,
    [alerts.firing, alerts.recent, now, alerts.error],
  );
  const leasesEl = useMemo(() => <Leases doc={leases.data} error={leases.error} now={now} />, [leases.data, leases.error, now]);
  const jobsEl = useMemo(() => <Jobs jobs={jobs.data} error={jobs.error} now={now} />, [jobs.data, jobs.error, now]);
  const submitEl = useMemo(() => <SubmitJob jobs={jobs.data} onChange={jobs.reload} />, [jobs.data, jobs.reload]);

  return (
    <main>
      <Banners {...props} />
      <section id="gpus" class="gpu-grid" aria-label="GPUs">
        {snap === null ? (
          <p class="empty">Waiting for the first sample…</p>
        ) : gpus.length === 0 ? (
          <p class="empty">No GPUs reported by the {snap.backend ?? ''} backend.</p>
        ) : (
          gpus.map((g) => (
            <GpuCard key={g.uuid ?? g.index} gpu={g} fields={fields.data} charted={band ? picked.includes(g.index) : null} onChartToggle={toggleLine} />
          ))
        )}
      </section>
      {fields.error && <p class="banner error">cannot read the metric list (/api/v1/fields): {fields.error}; retrying</p>}
      <LiveCharts live={live} fields={fields.data} dark={dark} gpus={chartGpus} picked={picked} />
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
  );
}
