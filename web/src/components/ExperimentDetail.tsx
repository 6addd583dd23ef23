// One run, `#/experiments/ID`: the seed's GPU Monitoring section (summary box, stats table, charts), and
// what the seed lacked: energy, p95, the lease, the efficiency line. While the run goes on its record has
// no samples yet: the charts then show the node's history of its GPUs since its start.
import { useEffect, useRef } from 'preact/hooks';
import type uPlot from 'uplot';
import { api, type FieldsDoc } from '../api';
import { efficiency, expApi, modelLabel, RUN_METRICS, runMetricMeta, type RunMetric } from '../experiments';
import { fmtNum, gpuColor, NA } from '../format';
import type { Experiment, MetricStat, RunSeries } from '../jobRecord';
import { href } from '../router';
import { useResource } from '../useResource';
import { cssVar, useUPlot } from '../useUPlot';
import { LoadError, StatusBadge } from './ExperimentList';

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

export function Detail({ id, dark, fields }: { id: string; dark: boolean; fields: FieldsDoc | null }) {
  const res = useResource(
    async (s) => {
      const e = await expApi.one(id, s);
      const live = e.status === 'running' && e.series.length === 0 ? await liveSeries(e, fields, s) : null;
      return { e, live };
    },
    [id],
    // A run that waits or runs changes: read it again every 3 s.
    { poll: (v) => (v.e.status === 'running' || v.e.status === 'waiting' ? 3000 : undefined) },
  );
  // Only this run's record: another run's, still on screen while this one loads, would mislead.
  const doc = res.current;
  const e = doc?.e ?? null;
  return (
    <>
      <p class="crumbs">
        <a href={href(['experiments'])}>← Experiments</a>
      </p>
      <LoadError res={res} />
      {e === null ? (
        !res.error && <p class="empty">Loading…</p>
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

      <LeaseFacts e={e} />

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
          {e.stats.length > 0 && <StatsTable e={e} metrics={metrics} energyLabel={energyLabel} />}
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

/** The lease box: the GPUs, CUDA_VISIBLE_DEVICES, how they were chosen, the lease's id. */
function LeaseFacts({ e }: { e: Experiment }) {
  return (
    <>
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
    </>
  );
}

type MetricMeta = { m: RunMetric; label: string; unit: string };

/** Per GPU, each run metric's mean, min–max and p95, and the energy. */
function StatsTable({ e, metrics, energyLabel }: { e: Experiment; metrics: MetricMeta[]; energyLabel: string }) {
  return (
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
  const shape = series.map((s) => s.index).join(',');
  const data = aligned(series, pick);
  const plot = useUPlot(
    box,
    () => {
      const grid = { stroke: cssVar('--grid'), width: 1 };
      return {
        height: HEIGHT,
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: yMax !== undefined ? { range: [0, yMax] } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        axes: [
          { stroke: cssVar('--muted'), grid, ticks: grid },
          { stroke: cssVar('--muted'), grid, ticks: grid, size: 56 },
        ],
        series: [{ label: 'time' }, ...series.map((s) => ({ label: `GPU ${s.index}`, stroke: gpuColor(s.index), width: 1.5, points: { show: false } }))],
      };
    },
    () => data,
    [shape, dark, yMax],
  );
  // New samples of a running job go in without rebuilding the chart.
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
