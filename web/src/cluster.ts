// The fleet documents of an agent started with --cluster-config: GET /api/v1/cluster/nodes, /gpus and
// /select (encoded by src/wire/fleet_json.cpp). As in api.ts, a missing or mistyped field becomes
// `null` (shown "n/a"), never a false 0, and every field name the Cluster view reads is named here.
import { getJson } from './api';
import { arr, num, obj, parseTime, str } from './read';

export interface ClusterNode {
  name: string;
  totalGpus: number | null;
  allocatableGpus: number | null;
  requestedGpus: number | null;
  freeGpus: number | null;
  idleGpuCount: number | null;
  gpusWithMetrics: number | null;
  /** Means over the node's GPUs with metrics, 0..100. */
  avgUtilizationPct: number | null;
  avgMemoryUsagePct: number | null;
  avgTemperatureC: number | null;
  totalPowerW: number | null;
  /** "ok", "not_ready", "unschedulable", "agent_unreachable", "metrics_error", "metrics_stale", "no_metrics". */
  health: string;
  problems: string[];
  ready: boolean | null;
  schedulable: boolean | null;
  inKubernetes: boolean;
  hasMetrics: boolean;
  gpuProduct: string | null;
  metricsSource: string | null;
  /** The agent's base URL as the document gives it (shown as text). */
  agentUrl: string | null;
  /** Where the agent's own dashboard is: an http(s) URL, or null when there is none to link to. */
  agentDashboardHref: string | null;
  observed: number | null;
  /** Where each number came from: [number's key, words], in the document's order. */
  sources: [string, string][];
}

export interface ClusterGpu {
  node: string;
  index: number | null;
  uuid: string | null;
  model: string | null;
  utilizationPct: number | null;
  memoryUsedMib: number | null;
  memoryTotalMib: number | null;
  memoryUsagePct: number | null;
  temperatureC: number | null;
  powerW: number | null;
  idle: boolean;
  source: string | null;
}

/** What every fleet document says about the facts behind it. */
export interface FleetInfo {
  thresholds: { utilizationPct: number | null; memoryPct: number | null };
  maxAgeS: number | null;
  sources: string[];
  kubernetes: boolean;
  errors: string[];
  collected: number | null;
}

export interface NodesDoc extends FleetInfo {
  nodes: ClusterNode[];
  unknownNodes: string[];
}

export interface GpusDoc extends FleetInfo {
  gpus: ClusterGpu[];
}

export interface Candidate {
  node: string;
  rank: number | null;
  eligible: boolean;
  whyNot: string | null;
  idleGpuCount: number | null;
  freeGpus: number | null;
}

export interface Selection extends FleetInfo {
  node: string | null;
  reason: string | null;
  requiredGpus: number | null;
  fallback: string | null;
  fallbackUsed: boolean;
  reasoning: string[];
  candidates: Candidate[];
}

export type Fallback = 'none' | 'least-loaded';

/**
 * The link to a node's own dashboard: only an absolute http or https URL qualifies (never `javascript:`,
 * `data:` or a relative path that would resolve against this page). Credentials are dropped, and the
 * path gains a trailing slash so that the dashboard's relative URLs resolve under an agent behind a
 * proxy's sub-path.
 */
export function dashboardHref(agentUrl: string | null): string | null {
  if (agentUrl === null) return null;
  let u: URL;
  try {
    u = new URL(agentUrl);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  u.username = '';
  u.password = '';
  u.search = '';
  u.hash = '';
  if (!u.pathname.endsWith('/')) u.pathname += '/';
  return u.href;
}

const bool = (x: unknown): boolean | null => (typeof x === 'boolean' ? x : null);
const strings = (x: unknown): string[] => arr(x).map(str).filter((s): s is string => s !== null);

function readInfo(d: Record<string, unknown>): FleetInfo {
  const t = obj(d.thresholds);
  return {
    thresholds: { utilizationPct: num(t.utilization), memoryPct: num(t.memory) },
    maxAgeS: num(d.max_age_s),
    sources: strings(d.sources),
    kubernetes: d.kubernetes === true,
    errors: strings(d.errors),
    collected: parseTime(d.collected),
  };
}

function readNode(x: unknown): ClusterNode {
  const n = obj(x);
  const agentUrl = str(n.agent_url);
  const sources: [string, string][] = [];
  for (const [k, v] of Object.entries(obj(n.sources))) if (typeof v === 'string' && v !== '') sources.push([k, v]);
  return {
    name: str(n.name) ?? '?',
    totalGpus: num(n.total_gpus),
    allocatableGpus: num(n.allocatable_gpus),
    requestedGpus: num(n.requested_gpus),
    freeGpus: num(n.free_gpus),
    idleGpuCount: num(n.idle_gpu_count),
    gpusWithMetrics: num(n.gpus_with_metrics),
    avgUtilizationPct: num(n.avg_utilization),
    avgMemoryUsagePct: num(n.avg_memory_usage),
    avgTemperatureC: num(n.avg_temperature),
    totalPowerW: num(n.total_power_w),
    health: str(n.health) ?? 'unknown',
    problems: strings(n.problems),
    ready: bool(n.ready),
    schedulable: bool(n.schedulable),
    inKubernetes: n.in_kubernetes === true,
    hasMetrics: n.has_metrics === true,
    gpuProduct: str(n.gpu_product),
    metricsSource: str(n.metrics_source),
    agentUrl,
    agentDashboardHref: dashboardHref(agentUrl),
    observed: parseTime(n.observed),
    sources,
  };
}

function readGpu(x: unknown): ClusterGpu {
  const g = obj(x);
  return {
    node: str(g.node) ?? '?',
    index: num(g.index),
    uuid: str(g.uuid),
    model: str(g.model),
    utilizationPct: num(g.utilization),
    memoryUsedMib: num(g.memory_used_mib),
    memoryTotalMib: num(g.memory_total_mib),
    memoryUsagePct: num(g.memory_usage),
    temperatureC: num(g.temperature),
    powerW: num(g.power_w),
    idle: g.idle === true,
    source: str(g.source),
  };
}

export function readNodesDoc(x: unknown): NodesDoc {
  const d = obj(x);
  return { ...readInfo(d), nodes: arr(d.nodes).map(readNode), unknownNodes: strings(d.unknown_nodes) };
}

export function readGpusDoc(x: unknown): GpusDoc {
  const d = obj(x);
  return { ...readInfo(d), gpus: arr(d.gpus).map(readGpu) };
}

export function readSelection(x: unknown): Selection {
  const d = obj(x);
  return {
    ...readInfo(d),
    node: str(d.node),
    reason: str(d.reason),
    requiredGpus: num(d.required_gpus),
    fallback: str(d.fallback),
    fallbackUsed: d.fallback_used === true,
    reasoning: arr(d.reasoning).filter((l): l is string => typeof l === 'string'),
    candidates: arr(d.candidates).map((c) => {
      const o = obj(c);
      return {
        node: str(o.node) ?? '?',
        rank: num(o.rank),
        eligible: o.eligible === true,
        whyNot: str(o.why_not),
        idleGpuCount: num(o.idle_gpu_count),
        freeGpus: num(o.free_gpus),
      };
    }),
  };
}

/** The agent's error codes for the fleet routes (503). */
export const NOT_CONFIGURED = 'cluster_not_configured';
export const NOT_READY = 'cluster_not_ready';

export const clusterApi = {
  nodes: async (signal?: AbortSignal) => readNodesDoc(await getJson('api/v1/cluster/nodes', signal)),
  gpus: async (signal?: AbortSignal) => readGpusDoc(await getJson('api/v1/cluster/gpus', signal)),
  select: async (gpus: number, fallback: Fallback, signal?: AbortSignal) =>
    readSelection(await getJson(`api/v1/cluster/select?gpus=${encodeURIComponent(String(gpus))}&fallback=${encodeURIComponent(fallback)}`, signal)),
  /**
   * Whether this agent has the fleet routes at all, from its OpenAPI document (an agent older than
   * them does not list them). Asked this way rather than through the routes themselves: an agent
   * without --cluster-config answers those with 503, which the browser logs as an error on every page
   * load. Throws when the agent cannot be asked.
   */
  available: async (signal?: AbortSignal): Promise<boolean> => {
    const paths = obj(obj(await getJson('api/openapi.json', signal)).paths);
    return 'api/v1/cluster/nodes' in paths || '/api/v1/cluster/nodes' in paths;
  },
};

/** A node's health as words: the document's names are the states of src/allocator/node_rank.hpp. */
export const HEALTH_LABEL: Record<string, string> = {
  ok: 'ready',
  not_ready: 'not ready',
  unschedulable: 'cordoned',
  agent_unreachable: 'agent unreachable',
  metrics_error: 'metrics error',
  metrics_stale: 'stale metrics',
  no_metrics: 'no metrics',
};

export const healthLabel = (h: string): string => HEALTH_LABEL[h] ?? h.replace(/_/g, ' ');

/** "ok" | "warn" | "bad": how alarming a health state is, for its colour. */
export function healthLevel(h: string): 'ok' | 'warn' | 'bad' {
  if (h === 'ok') return 'ok';
  if (h === 'not_ready' || h === 'agent_unreachable' || h === 'metrics_error') return 'bad';
  return 'warn';
}
