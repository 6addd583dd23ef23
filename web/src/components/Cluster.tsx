// The Cluster view (#/cluster): the fleet as this agent sees it with --cluster-config. One card per node
// (GPU counts, mean utilization and memory, health, where the numbers came from, the node's GPUs as small
// bars, a link to the node's own dashboard), and a "which node would take N GPUs?" control. Polled every
// few seconds; a failed request keeps the last good data on screen with the error above it.
// Every string from the documents is rendered as text (Preact escapes it), never as HTML.
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from '../api';
import {
  clusterApi,
  healthLabel,
  healthLevel,
  NOT_CONFIGURED,
  NOT_READY,
  type ClusterGpu,
  type ClusterNode,
  type Fallback,
  type GpusDoc,
  type NodesDoc,
  type Selection,
} from '../cluster';
import { fmtAgo, fmtMib, fmtNum, fmtTime, NA } from '../format';

/** How often the view asks again; the agent's own refresh runs on its cadence (refresh_interval_s). */
export const CLUSTER_POLL_MS = 5000;
/** Before the agent's first fleet refresh has finished, ask again sooner. */
const NOT_READY_POLL_MS = 1000;
/** A request that takes longer than this counts as failed (and is retried on the next poll). */
const REQUEST_TIMEOUT_MS = 8000;

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

// ---------------------------------------------------------------------------------------------------
// Data

type FleetState =
  | { kind: 'loading' }
  | { kind: 'ready' }
  | { kind: 'not_configured'; message: string }
  | { kind: 'not_ready'; message: string }
  | { kind: 'no_routes' };

interface Fleet {
  state: FleetState;
  nodes: NodesDoc | null;
  gpus: GpusDoc | null;
  /** The last request's failure; the last good documents stay on screen. */
  error: string | null;
  updatedAt: number | null;
}

function useFleet(): Fleet {
  const [fleet, setFleet] = useState<Fleet>({ state: { kind: 'loading' }, nodes: null, gpus: null, error: null, updatedAt: null });
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let alive = true;
    let inflight: AbortController | null = null;
    const poll = async () => {
      const ac = new AbortController();
      inflight = ac;
      const giveUp = setTimeout(() => ac.abort(new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`)), REQUEST_TIMEOUT_MS);
      let next = CLUSTER_POLL_MS;
      try {
        const [nodes, gpus] = await Promise.all([clusterApi.nodes(ac.signal), clusterApi.gpus(ac.signal)]);
        if (alive) setFleet({ state: { kind: 'ready' }, nodes, gpus, error: null, updatedAt: Date.now() });
      } catch (e) {
        if (!alive) return;
        if (e instanceof ApiError && e.status === 503 && e.code === NOT_CONFIGURED) {
          setFleet({ state: { kind: 'not_configured', message: e.message }, nodes: null, gpus: null, error: null, updatedAt: Date.now() });
        } else if (e instanceof ApiError && e.status === 503 && e.code === NOT_READY) {
          next = NOT_READY_POLL_MS;
          setFleet((f) => ({ ...f, state: f.nodes ? f.state : { kind: 'not_ready', message: e.message }, error: null }));
        } else if (e instanceof ApiError && e.status === 404) {
          setFleet({ state: { kind: 'no_routes' }, nodes: null, gpus: null, error: null, updatedAt: Date.now() });
        } else {
          const why = ac.signal.aborted ? errText(ac.signal.reason) : errText(e);
          setFleet((f) => ({ ...f, error: `cannot read the fleet from this agent: ${why}` }));
        }
      } finally {
        clearTimeout(giveUp);
        inflight = null;
        if (alive) timer = setTimeout(poll, next);
      }
    };
    void poll();
    return () => {
      alive = false;
      clearTimeout(timer);
      inflight?.abort();
    };
  }, []);
  return fleet;
}

// ---------------------------------------------------------------------------------------------------
// Pieces

const fmtCount = (v: number | null) => (v === null ? NA : String(v));
const fmtPct1 = (v: number | null) => fmtNum(v, 1, ' %');

function Meter({ label, value, cls }: { label: string; value: number | null; cls: string }) {
  return (
    <div class="meter">
      <div class="meter-head">
        <span class="label">{label}</span>
        <span class={`value ${cls} ${value === null ? 'na' : ''}`}>{fmtPct1(value)}</span>
      </div>
      <div class="bar" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={value ?? undefined}>
        <div class={`fill ${value !== null && value >= 90 ? 'hot' : value !== null && value >= 70 ? 'warm' : ''}`} style={{ width: `${value ?? 0}%` }} />
      </div>
    </div>
  );
}

function gpuTitle(g: ClusterGpu): string {
  const lines = [`GPU ${g.index ?? NA}${g.model ? ` · ${g.model}` : ''}`];
  if (g.uuid) lines.push(g.uuid);
  lines.push(`utilization ${g.utilizationPct === null ? NA : `${g.utilizationPct} %`}`);
  lines.push(`memory ${fmtMib(g.memoryUsedMib)} / ${fmtMib(g.memoryTotalMib)} (${fmtPct1(g.memoryUsagePct)})`);
  lines.push(`temperature ${fmtNum(g.temperatureC, 0, ' °C')} · power ${fmtNum(g.powerW, 1, ' W')}`);
  lines.push(g.idle ? 'idle' : 'busy');
  return lines.join('\n');
}

const clampPct = (v: number | null) => (v === null ? 0 : Math.max(0, Math.min(100, v)));

/** One GPU as two small vertical bars: utilization and memory used. */
function GpuMini({ gpu }: { gpu: ClusterGpu }) {
  const title = gpuTitle(gpu);
  return (
    <div class={`gpu-mini ${gpu.idle ? 'idle' : ''}`} title={title} role="img" aria-label={title} data-gpu-index={gpu.index ?? ''} data-idle={String(gpu.idle)}>
      <div class="vbars">
        <div class="vbar util">
          <div class="fill" style={{ height: `${clampPct(gpu.utilizationPct)}%` }} />
        </div>
        <div class="vbar mem">
          <div class="fill" style={{ height: `${clampPct(gpu.memoryUsagePct)}%` }} />
        </div>
      </div>
      <span class="gpu-mini-index">{gpu.index ?? '?'}</span>
    </div>
  );
}

function Count({ field, label, value, source }: { field: string; label: string; value: number | null; source: string | undefined }) {
  return (
    <div data-field={field} title={source ? `${label}: ${source}` : undefined}>
      <dt>{label}</dt>
      <dd class={value === null ? 'na' : ''}>{fmtCount(value)}</dd>
    </div>
  );
}

const SOURCE_LABEL: Record<string, string> = {
  total_gpus: 'total',
  allocatable_gpus: 'allocatable',
  requested_gpus: 'requested',
  free_gpus: 'free',
  idle_gpu_count: 'idle',
  utilization: 'utilization, memory',
};

function NodeCard({ node, gpus, chosen, now }: { node: ClusterNode; gpus: ClusterGpu[]; chosen: boolean; now: number }) {
  const level = healthLevel(node.health);
  const src = new Map(node.sources);
  return (
    <article
      class={`cluster-node level-${level} ${chosen ? 'chosen' : ''}`}
      data-node={node.name}
      data-health={node.health}
      data-agent-url={node.agentUrl ?? ''}
    >
      <header>
        <span class="cluster-node-name">{node.name}</span>
        <span class={`badge node-health ${level}`} title={node.problems.join('\n')}>
          {healthLabel(node.health)}
        </span>
        {chosen && <span class="badge chosen-badge">selected</span>}
        {node.agentDashboardHref && (
          <a class="agent-link" href={node.agentDashboardHref} target="_blank" rel="noopener noreferrer" title={`this node's agent: ${node.agentUrl}`}>
            dashboard ↗
          </a>
        )}
      </header>
      <p class="node-facts muted">
        {node.gpuProduct ?? 'GPU model unknown'} · metrics: <span class="metrics-source">{node.metricsSource ?? 'none'}</span>
        {node.observed !== null && <span title={fmtTime(node.observed)}> · {fmtAgo(node.observed, now)}</span>}
        {node.inKubernetes && ' · Kubernetes'}
      </p>
      <dl class="gpu-counts">
        <Count field="free_gpus" label="free" value={node.freeGpus} source={src.get('free_gpus')} />
        <Count field="idle_gpu_count" label="idle" value={node.idleGpuCount} source={src.get('idle_gpu_count')} />
        <Count field="allocatable_gpus" label="allocatable" value={node.allocatableGpus} source={src.get('allocatable_gpus')} />
        <Count field="total_gpus" label="total" value={node.totalGpus} source={src.get('total_gpus')} />
      </dl>
      <Meter label="mean utilization" value={node.avgUtilizationPct} cls="avg-util" />
      <Meter label="mean memory used" value={node.avgMemoryUsagePct} cls="avg-mem" />
      {gpus.length > 0 ? (
        <div class="gpu-strip" aria-label={`${node.name}: GPUs`}>
          {gpus.map((g) => (
            <GpuMini key={`${g.index}/${g.uuid}`} gpu={g} />
          ))}
        </div>
      ) : (
        <p class="empty no-gpu-metrics">No GPU metrics from this node.</p>
      )}
      {node.problems.length > 0 && (
        <ul class="problems">
          {node.problems.map((p) => (
            <li>{p}</li>
          ))}
        </ul>
      )}
      {node.sources.length > 0 && (
        <details class="sources">
          <summary>where these numbers come from</summary>
          <dl>
            {node.sources.map(([k, v]) => (
              <div data-source={k}>
                <dt>{SOURCE_LABEL[k] ?? k.replace(/_/g, ' ')}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
        </details>
      )}
    </article>
  );
}

function SelectControl({ onChosen }: { onChosen: (node: string | null) => void }) {
  const [gpus, setGpus] = useState('1');
  const [fallback, setFallback] = useState<Fallback>('none');
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<{ sel: Selection; at: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const ask = async (e: Event) => {
    e.preventDefault();
    const n = Number(gpus);
    if (!Number.isInteger(n) || n < 1 || n > 4096) {
      setError('the number of GPUs must be a whole number from 1 to 4096');
      return;
    }
    setBusy(true);
    try {
      const sel = await clusterApi.select(n, fallback, AbortSignal.timeout(REQUEST_TIMEOUT_MS));
      setAnswer({ sel, at: Date.now() });
      setError(null);
      onChosen(sel.node);
    } catch (err) {
      setError(`cannot ask the agent: ${errText(err)}`);
    } finally {
      setBusy(false);
    }
  };
  const sel = answer?.sel;
  return (
    <section class="panel" id="cluster-select">
      <h2>Which node would take N GPUs?</h2>
      <form class="select-form" onSubmit={ask}>
        <label>
          GPUs{' '}
          <input
            id="select-gpus"
            type="number"
            min={1}
            max={4096}
            step={1}
            required
            value={gpus}
            onInput={(e) => setGpus((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <label>
          when no node has enough idle GPUs{' '}
          <select id="select-fallback" value={fallback} onChange={(e) => setFallback((e.currentTarget as HTMLSelectElement).value as Fallback)}>
            <option value="none">pin none</option>
            <option value="least-loaded">take the least loaded</option>
          </select>
        </label>
        <button type="submit" id="select-ask" disabled={busy}>
          {busy ? 'asking…' : 'ask'}
        </button>
      </form>
      {error && <p class="error">{error}</p>}
      {sel && (
        <div id="select-result" data-node={sel.node ?? ''} data-asked={String(answer.at)}>
          <p class="select-answer">
            {sel.node !== null ? (
              <>
                <span class="muted">{sel.requiredGpus ?? '?'} GPU(s) →</span> <strong id="select-node">{sel.node}</strong>
                {sel.fallbackUsed && <span class="badge">least-loaded fallback</span>}
              </>
            ) : (
              <strong id="select-none">No node qualifies for {sel.requiredGpus ?? '?'} GPU(s).</strong>
            )}{' '}
            <span class="muted">(asked {fmtTime(answer.at)})</span>
          </p>
          {sel.reason && <p class="select-reason">{sel.reason}</p>}
          {sel.reasoning.length > 0 && <pre class="reasoning">{sel.reasoning.join('\n')}</pre>}
          {sel.candidates.length > 0 && (
            <p class="muted candidates">
              ranking:{' '}
              {sel.candidates.map((c, i) => (
                <span title={c.whyNot ?? `${c.idleGpuCount ?? NA} idle, ${c.freeGpus ?? NA} free`}>
                  {i > 0 ? ', ' : ''}
                  {c.rank !== null ? `${c.rank}. ${c.node}` : `${c.node} (${c.whyNot ?? 'not eligible'})`}
                </span>
              ))}
            </p>
          )}
        </div>
      )}
    </section>
  );
}

function NotConfigured({ message }: { message: string }) {
  return (
    <section class="panel" id="cluster-not-configured">
      <h2>No fleet view on this agent</h2>
      <p>{message}.</p>
      <p>
        Start the agent with <code>gpufleet serve --cluster-config FILE</code>, where FILE names the fleet's sources, for example{' '}
        <code>{'{"agents": ["http://gpu-1:9401", "http://gpu-2:9401"], "refresh_interval_s": 15}'}</code> or{' '}
        <code>{'{"prometheus": "http://prometheus:9090"}'}</code>. Every node then shows up here with its GPUs; the README's
        "Fleet" section lists every key.
      </p>
    </section>
  );
}

// ---------------------------------------------------------------------------------------------------
// The view

export function ClusterView() {
  const fleet = useFleet();
  const [chosen, setChosen] = useState<string | null>(null);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 5000);
    return () => clearInterval(t);
  }, []);

  const { state, nodes, gpus, error } = fleet;
  const byNode = new Map<string, ClusterGpu[]>();
  for (const g of gpus?.gpus ?? []) {
    const list = byNode.get(g.node) ?? [];
    list.push(g);
    byNode.set(g.node, list);
  }
  for (const list of byNode.values()) list.sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  const sum = (f: (n: ClusterNode) => number | null) => (nodes?.nodes ?? []).reduce((s, n) => s + (f(n) ?? 0), 0);
  const th = nodes?.thresholds;

  return (
    <main class="cluster" id="cluster">
      {error && (
        <p class="banner error" id="cluster-error">
          {error} — retrying every {CLUSTER_POLL_MS / 1000} s{nodes ? '; the numbers below are from the last answer' : ''}.
        </p>
      )}
      {state.kind === 'not_configured' && <NotConfigured message={state.message} />}
      {state.kind === 'no_routes' && (
        <p class="banner" id="cluster-no-routes">
          This agent has no fleet routes (/api/v1/cluster/…): it is older than the Cluster view.
        </p>
      )}
      {state.kind === 'not_ready' && (
        <p class="empty" id="cluster-not-ready">
          The agent is gathering the fleet's facts for the first time ({state.message})…
        </p>
      )}
      {state.kind === 'loading' && !error && <p class="empty">Loading the fleet…</p>}
      {nodes && (
        <>
          <section class="panel cluster-summary" id="cluster-summary">
            <h2>
              Cluster <span class="count">{nodes.nodes.length} node(s)</span>
            </h2>
            <dl class="facts cluster-facts">
              <div>
                <dt>GPUs</dt>
                <dd id="cluster-total">{sum((n) => n.totalGpus)}</dd>
              </div>
              <div>
                <dt>free</dt>
                <dd id="cluster-free">{sum((n) => n.freeGpus)}</dd>
              </div>
              <div>
                <dt>idle</dt>
                <dd id="cluster-idle">{sum((n) => n.idleGpuCount)}</dd>
              </div>
              <div>
                <dt>sources</dt>
                <dd id="cluster-sources">{[...nodes.sources, ...(nodes.kubernetes ? ['kubernetes'] : [])].join(', ') || NA}</dd>
              </div>
              <div>
                <dt>collected</dt>
                <dd title={fmtTime(nodes.collected)}>{fmtAgo(nodes.collected, now)}</dd>
              </div>
            </dl>
            <p class="note">
              Idle: utilization below {fmtNum(th?.utilizationPct ?? null, 0, ' %')} and memory below {fmtNum(th?.memoryPct ?? null, 0, ' %')} of
              capacity. Bars per GPU: <span class="legend util">utilization</span> <span class="legend mem">memory</span>; idle GPUs are
              outlined. Updated {fmtTime(fleet.updatedAt)}, every {CLUSTER_POLL_MS / 1000} s.
            </p>
            {nodes.errors.length > 0 && (
              <ul class="banner warnings" id="cluster-source-errors">
                {nodes.errors.map((e) => (
                  <li>{e}</li>
                ))}
              </ul>
            )}
            {nodes.unknownNodes.length > 0 && (
              <p class="note">Metrics for nodes Kubernetes does not list (left out): {nodes.unknownNodes.join(', ')}</p>
            )}
          </section>
          <SelectControl onChosen={setChosen} />
          <section class="cluster-grid" id="cluster-nodes" aria-label="nodes">
            {nodes.nodes.length === 0 ? (
              <p class="empty">The fleet's sources name no node.</p>
            ) : (
              nodes.nodes.map((n) => (
                <NodeCard key={`${n.name}@${n.agentUrl ?? ''}`} node={n} gpus={byNode.get(n.name) ?? []} chosen={chosen === n.name} now={now} />
              ))
            )}
          </section>
        </>
      )}
    </main>
  );
}
