// The page of one GPU, `#/gpus/N?range=6h` (or `?from=..&to=..`, epoch seconds): who it is, what runs on it
// now, and the history of every metric the agent keeps for it over the chosen range, with the GPU's alert
// episodes marked on the time axis. Everything the view shows is in its URL.
import { useMemo, useState } from 'preact/hooks';
import type { Alert, FieldInfo, FieldsDoc, Gpu, Snapshot } from '../api';
import { fmtMib, fmtNum, fmtTime, NA } from '../format';
import { episodeTitle, gpuApi, type GpuHistory } from '../gpuApi';
import { bounds, fromLocalInput, parseRange, PRESETS, showsBand, spanOf, stepFor, toLocalInput, type TimeRange } from '../ranges';
import { href, navigate, type Route } from '../router';
import { useResource, type Resource } from '../useResource';
import { ErrorBoundary } from './ErrorBoundary';
import { HistoryChart } from './HistoryChart';
import { ProcessTable } from './ProcessTable';

interface Props {
  route: Route;
  snap: Snapshot | null;
  fields: FieldsDoc | null;
  dark: boolean;
}

export function GpuPage(props: Props) {
  return (
    <ErrorBoundary what="The GPU page">
      <GpuPageBody {...props} />
    </ErrorBoundary>
  );
}

/** "failed: … (retrying in 3 s)", shown where the data would be. */
function Failure({ what, res }: { what: string; res: Resource<unknown> }) {
  if (!res.error) return null;
  const secs = res.retryAt === null ? null : Math.max(1, Math.round((res.retryAt - Date.now()) / 1000));
  return (
    <p class="banner error load-error" role="status">
      cannot read {what}: {res.error}
      {secs !== null && ` (retrying in ${secs} s)`}
    </p>
  );
}

function Identity({ gpu, snap }: { gpu: Gpu; snap: Snapshot | null }) {
  const driver = snap?.driverVersion ? `${snap.driverVersion}${snap.cudaDriverVersion ? ` · CUDA ${snap.cudaDriverVersion}` : ''}` : NA;
  const rows: [string, string, string][] = [
    ['model', 'name', gpu.name ?? NA],
    ['UUID', 'uuid', gpu.uuid ?? NA],
    ['bus id', 'pci_bus_id', gpu.pciBusId ?? NA],
    ['driver', 'driver', driver],
    ['power limit', 'power_limit', fmtNum(gpu.powerLimitW, 0, ' W')],
    ['memory', 'memory_total', fmtMib(gpu.memoryTotalMib)],
    ['health', 'health', gpu.health + (gpu.healthMessage ? ` (${gpu.healthMessage})` : '')],
  ];
  return (
    <section class="panel" aria-labelledby="gpu-identity-title">
      <h2 id="gpu-identity-title">Identity</h2>
      <dl class="identity" id="gpu-identity">
        {rows.map(([label, key, value]) => (
          <div key={key}>
            <dt>{label}</dt>
            <dd data-field={key} class={value === NA ? 'na' : key === 'uuid' || key === 'pci_bus_id' ? 'mono' : ''}>
              {value}
            </dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

function GpuProcesses({ gpu }: { gpu: Gpu }) {
  const rows = gpu.processes.map((p) => ({ gpu: gpu.index, p }));
  return (
    <section class="panel" id="gpu-processes" aria-labelledby="gpu-processes-title">
      <h2 id="gpu-processes-title">
        Processes now <span class="count">{rows.length}</span>
      </h2>
      {rows.length === 0 ? <p class="empty">Nothing runs on this GPU.</p> : <ProcessTable rows={rows} showGpu={false} />}
    </section>
  );
}

function RangePicker({ index, range, now }: { index: number; range: TimeRange; now: number }) {
  const [from, to] = bounds(range, now);
  const [draft, setDraft] = useState<{ from: string; to: string } | null>(null);
  const shown = draft ?? { from: toLocalInput(from), to: toLocalInput(to) };
  const [bad, setBad] = useState<string | null>(null);
  const apply = (e: Event) => {
    e.preventDefault();
    const f = fromLocalInput(shown.from);
    const t = fromLocalInput(shown.to);
    if (f === null || t === null || t <= f) {
      setBad('the start must be a time before the end');
      return;
    }
    setBad(null);
    setDraft(null);
    navigate(href(['gpus', index], { from: f, to: t }));
  };
  return (
    <div class="range-picker" id="range-picker">
      <nav aria-label="time range" class="range-presets">
        {PRESETS.map((p) => {
          const active = range.kind === 'preset' && range.key === p.key;
          return (
            <a key={p.key} href={href(['gpus', index], { range: p.key })} class={active ? 'active' : ''} aria-current={active ? 'true' : undefined} data-range={p.key}>
              {p.label}
            </a>
          );
        })}
      </nav>
      <form class="range-custom" onSubmit={apply}>
        <label>
          from <input type="datetime-local" name="from" value={shown.from} onInput={(e) => setDraft({ ...shown, from: (e.target as HTMLInputElement).value })} />
        </label>
        <label>
          to <input type="datetime-local" name="to" value={shown.to} onInput={(e) => setDraft({ ...shown, to: (e.target as HTMLInputElement).value })} />
        </label>
        <button type="submit" class={range.kind === 'custom' ? 'active' : ''}>
          show
        </button>
        {bad && <span class="error">{bad}</span>}
      </form>
    </div>
  );
}

interface MetricView {
  field: FieldInfo;
  title: string;
  unit: string;
  scale: number;
  yMax?: number;
  fmt: (v: number) => string;
}

function metricView(f: FieldInfo): MetricView {
  const title = f.label.charAt(0).toUpperCase() + f.label.slice(1);
  if (f.unit === 'MiB')
    return { field: f, title, unit: 'GiB', scale: 1 / 1024, fmt: (v) => `${v.toFixed(v >= 10 || v === 0 ? 0 : 1)} GiB` };
  const unit = f.unit ?? '';
  return { field: f, title, unit, scale: 1, yMax: unit === '%' ? 100 : undefined, fmt: (v) => `${v.toFixed(v >= 100 || v === 0 ? 0 : 1)}${unit ? ` ${unit}` : ''}` };
}

function Episodes({ list, from, to }: { list: Alert[]; from: number; to: number }) {
  return (
    <section class="panel" id="gpu-episodes" aria-labelledby="gpu-episodes-title">
      <h2 id="gpu-episodes-title">
        Alert episodes in this range <span class="count">{list.length}</span>
      </h2>
      {list.length === 0 ? (
        <p class="empty">None between {fmtTime(from * 1000)} and {fmtTime(to * 1000)}.</p>
      ) : (
        <ul class="episode-list">
          {list.map((a) => (
            <li key={a.key} class={`sev-${a.severity ?? 'unknown'}`}>
              <span class="nowrap">
                {fmtTime(a.startedAt)} – {a.resolvedAt === null ? 'now (firing)' : fmtTime(a.resolvedAt)}
              </span>{' '}
              <strong>{a.rule.replace(/_/g, ' ')}</strong> <span class="muted">{episodeTitle(a)}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function GpuPageBody({ route, snap, fields, dark }: Props) {
  const raw = route.path[1] ?? '';
  const index = /^\d{1,6}$/.test(raw) ? Number(raw) : null;
  const rangeKey = route.query.toString();
  const range = useMemo(() => parseRange(route.query), [rangeKey]); // eslint-disable-line react-hooks/exhaustive-deps
  const stepS = stepFor(spanOf(range));
  const band = showsBand(stepS);
  const metrics = useMemo(() => (fields ? fields.fields.filter((f) => f.historyMetric !== null).map(metricView) : []), [fields]);

  const info = useResource((signal) => (index === null ? Promise.reject(new Error('no GPU index')) : gpuApi.gpu(index, signal)), [index], { poll: 30_000 });
  // A preset range ends now: it is read again as time moves (about once per bucket, 10 s to 1 min apart).
  const refreshMs = range.kind === 'preset' ? Math.min(60_000, Math.max(10_000, stepS * 1000)) : undefined;
  const hist = useResource(
    async (signal) => {
      if (index === null || metrics.length === 0) return null;
      const at = Date.now();
      const q = range.kind === 'preset' ? { since: range.key, stepS } : { since: String(range.fromS), until: String(range.toS), stepS };
      const docs = await Promise.all(metrics.map((m) => gpuApi.history(index, m.field.historyMetric!, q, signal)));
      return { at, byMetric: new Map<string, GpuHistory>(docs.map((d, i) => [metrics[i].field.historyMetric!, d])) };
    },
    [index, rangeKey, metrics],
    { poll: refreshMs },
  );
  // Only this GPU's episodes in this range, filtered by the agent.
  const eps = useResource(
    (signal) =>
      index === null
        ? Promise.resolve([])
        : gpuApi.episodes(index, range.kind === 'preset' ? { since: range.key } : { since: String(range.fromS), until: String(range.toS) }, signal),
    [index, rangeKey],
    { poll: 30_000 },
  );

  const now = hist.data?.at ?? Date.now();
  const [from, to] = bounds(range, now);
  // Memoised: the charts redraw when this list changes, and the page renders on every live update.
  const inRange = useMemo(
    () => (eps.data ?? []).filter((a) => (a.startedAt ?? 0) / 1000 < to && (a.resolvedAt === null || a.resolvedAt / 1000 >= from)),
    [eps.data, from, to],
  );

  if (index === null)
    return (
      <main id="gpu-page">
        <p class="banner error">"{raw}" is not a GPU index. <a href="#/">Back to the node</a></p>
      </main>
    );

  // The live reading wins over the fetched one (it is newer); the fetched one covers a page opened before
  // the first live sample, and names the GPU when it is gone from the live document.
  const liveGpu = snap?.gpus.find((g) => g.index === index) ?? null;
  const gpu = liveGpu ?? info.data;
  const zoom = (f: number, t: number) => navigate(href(['gpus', index], { from: f, to: t }));
  const notHere = info.error !== null && /no GPU/.test(info.error) && liveGpu === null;

  return (
    <main id="gpu-page" data-gpu-index={index}>
      <div class="page-head">
        <a href="#/" class="back">
          ← all GPUs
        </a>
        <h1 id="gpu-title">
          GPU {index} <span class="muted">{gpu?.name ?? ''}</span>
        </h1>
      </div>
      {notHere ? (
        <p class="banner error" id="gpu-missing">
          {info.error}
        </p>
      ) : (
        <Failure what={`GPU ${index}`} res={info} />
      )}
      {gpu && (
        <div class="two-col">
          <Identity gpu={info.data ?? gpu} snap={snap} />
          <GpuProcesses gpu={gpu} />
        </div>
      )}
      <section class="panel" id="gpu-history" aria-labelledby="gpu-history-title">
        <h2 id="gpu-history-title">
          History <span class="count" id="history-step">step {stepS >= 60 ? `${stepS / 60} min` : `${stepS} s`}</span>
        </h2>
        {/* Keyed by the range: a new range drops what was typed into the custom form. */}
        <RangePicker key={rangeKey} index={index} range={range} now={now} />
        <p class="note">Drag across a chart to look closer; the browser's back button returns.</p>
        <Failure what="the history" res={hist} />
        {fields === null ? (
          <p class="empty">Loading the metric list…</p>
        ) : metrics.length === 0 ? (
          <p class="empty">This agent keeps no history.</p>
        ) : (
          <div class="charts" id="gpu-charts">
            {metrics.map((m) => (
              <HistoryChart
                key={m.field.key}
                id={`history-${m.field.historyMetric}`}
                title={m.title}
                unit={m.unit}
                points={hist.data?.byMetric.get(m.field.historyMetric!)?.points ?? []}
                scale={m.scale}
                from={from}
                to={to}
                band={band}
                yMax={m.yMax}
                episodes={inRange}
                fmtValue={m.fmt}
                dark={dark}
                onZoom={zoom}
              />
            ))}
          </div>
        )}
      </section>
      <Failure what="the alert episodes" res={eps} />
      <Episodes list={inRange} from={from} to={to} />
    </main>
  );
}
