// Every contact with the agent lives here: URLs, JSON field names, and the WebSocket protocol (the job
// record's decoder is jobRecord.ts, the one the experiments pages read too; the fleet's and the GPU page's
// documents are in cluster.ts and gpuApi.ts). The rest of the UI sees only the normalized types below, in
// which a missing or mistyped field is `null` (rendered "n/a"), never a false 0.
import { readJob, type Job } from './jobRecord';
import { arr, first, num, obj, parseTime, str, type Json } from './read';

export type { Job };

// ---------------------------------------------------------------------------------------------------
// Normalized types

export type Health = 'ok' | 'lost' | 'error' | string;

export interface GpuProcess {
  pid: number | null;
  name: string | null;
  user: string | null;
  command: string | null;
  container: string | null;
  type: string | null;
  memoryMib: number | null;
  /** MIG: the instance the driver says the process runs in (null when MIG is off or it does not say). */
  migUuid: string | null;
  migProfile: string | null;
  gpuInstanceId: number | null;
}

/** One MIG instance of a GPU. Its memory is part of the GPU's, never added to it. */
export interface MigInstance {
  index: number | null;
  uuid: string | null;
  profile: string | null;
  gpuInstanceId: number | null;
  computeInstanceId: number | null;
  memoryTotalMib: number | null;
  memoryUsedMib: number | null;
  memoryFreeMib: number | null;
}

export interface Gpu {
  index: number;
  id: string | null;
  uuid: string | null;
  name: string | null;
  pciBusId: string | null;
  utilizationPct: number | null;
  memoryUtilizationPct: number | null;
  memoryTotalMib: number | null;
  memoryUsedMib: number | null;
  memoryFreeMib: number | null;
  temperatureC: number | null;
  powerW: number | null;
  powerLimitW: number | null;
  fanPct: number | null;
  graphicsClockMhz: number | null;
  memoryClockMhz: number | null;
  health: Health;
  healthMessage: string | null;
  /** The agent's verdict (core/gpu_health): false for a critical XID, a failed row remap or a lost GPU. */
  healthy: boolean;
  /** Why it is unhealthy, one sentence each (empty when healthy). */
  healthProblems: string[];
  performanceState: string | null;
  availabilityScore: number | null;
  processes: GpuProcess[];
  /** MIG: the GPU's instances, by index; empty when MIG is off. */
  migInstances: MigInstance[];
  /** Every numeric metric by its field key ("utilization", "memory.used"): what the charts pick from. */
  values: Record<string, number | null>;
  /** Field key → why its value is null ("not_supported", "no_permission", "gpu_lost", …). */
  missing: Record<string, string>;
}

/** One row of the agent's field table (GET /api/v1/fields). */
export interface FieldInfo {
  key: string;
  label: string;
  unit: string | null;
  description: string | null;
  /** The history endpoint's name for it; null when the agent keeps no history of it. */
  historyMetric: string | null;
}

export interface FieldsDoc {
  fields: FieldInfo[];
  /** Reason code → text for people ("not_supported" → "not supported"). */
  reasons: Record<string, string>;
}

export interface Snapshot {
  /** Wall time of the sample, epoch ms (the receive time when the document has none). */
  t: number;
  node: string | null;
  backend: string | null;
  simulated: boolean;
  driverVersion: string | null;
  cudaDriverVersion: string | null;
  warnings: string[];
  processVisibilityMessage: string | null;
  gpus: Gpu[];
}

export type AlertState = 'firing' | 'resolved';

export interface Alert {
  /** Stable key: the server's id, or rule + GPU when it has none. */
  key: string;
  rule: string;
  gpuIndex: number | null;
  gpuUuid: string | null;
  severity: string | null;
  message: string | null;
  value: number | null;
  threshold: number | null;
  state: AlertState;
  startedAt: number | null;
  resolvedAt: number | null;
  /** When this event happened (epoch ms): resolved_at for a resolve, started_at for a fire. */
  at: number | null;
}

export interface AlertsDoc {
  firing: Alert[];
  recent: Alert[];
}

export interface Lease {
  id: string;
  name: string | null;
  jobId: string | null;
  gpus: number[];
  ownerUser: string | null;
  ownerPid: number | null;
  createdAt: number | null;
}

/** What this page's credentials may do on the agent (GET /api/v1/session). */
export interface Session {
  writer: boolean;
  jobsSubmit: boolean;
}

/** A Docker-image job for POST /api/v1/jobs. */
export interface JobRequest {
  image: string;
  args: string[];
  gpus: number;
  min_memory_mb: number;
  name?: string;
  wait_s: number;
}

/** A metric the charts show: the history endpoint's metric name (see FieldInfo.historyMetric). */
export type ChartMetric = string;

export interface HistorySeries {
  gpu: number;
  points: { t: number; v: number | null }[];
}

export interface HistoryDoc {
  metric: string;
  unit: string | null;
  series: HistorySeries[];
}

export interface Waiter {
  id: string;
  name: string | null;
  gpus: number | null;
  priority: number | null;
  ownerUser: string | null;
  enqueuedAt: number | null;
}

export interface LeasesDoc {
  leases: Lease[];
  waiting: Waiter[];
}

export interface AgentHealth {
  /** "ok" | "degraded" */
  status: string | null;
  problems: string[];
}

// ---------------------------------------------------------------------------------------------------
// Decoders

function readProcess(x: unknown): GpuProcess {
  const p = obj(x);
  return {
    pid: num(p.pid),
    name: str(p.name),
    user: str(p.user),
    command: str(p.command),
    container: str(p.container) ?? str(obj(p.container).name),
    type: str(p.type),
    memoryMib: first(num(p.used_memory_mb), num(p.used_memory_mib), num(p.memory_mib)),
    migUuid: str(p.mig_uuid),
    migProfile: str(p.mig_profile),
    gpuInstanceId: num(p.gpu_instance_id),
  };
}

function readMigInstance(x: unknown): MigInstance {
  const m = obj(x);
  const mem = obj(m.memory);
  return {
    index: num(m.index),
    uuid: str(m.uuid),
    profile: str(m.profile),
    gpuInstanceId: num(m.gpu_instance_id),
    computeInstanceId: num(m.compute_instance_id),
    memoryTotalMib: num(mem.total),
    memoryUsedMib: num(mem.used),
    memoryFreeMib: num(mem.free),
  };
}

/** Numbers by their dotted path, one level of nesting deep (as the agent's GPU object is). */
function numericValues(g: Record<string, unknown>): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const [k, v] of Object.entries(g)) {
    if (v === null || typeof v === 'number') out[k] = num(v);
    else if (typeof v === 'object' && !Array.isArray(v))
      for (const [k2, v2] of Object.entries(v as Record<string, unknown>)) if (v2 === null || typeof v2 === 'number') out[`${k}.${k2}`] = num(v2);
  }
  return out;
}

function readMissing(x: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(x))) {
    const why = str(v);
    if (why !== null) out[k] = why;
  }
  return out;
}

export function readFields(x: unknown): FieldsDoc {
  const d = obj(x);
  const fields: FieldInfo[] = [];
  for (const f of arr(d.fields)) {
    const o = obj(f);
    const key = str(o.key);
    if (key === null) continue;
    fields.push({ key, label: str(o.label) ?? key, unit: str(o.unit), description: str(o.description), historyMetric: str(o.history_metric) });
  }
  const reasons: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(d.missing_reasons))) {
    const text = str(v);
    if (text !== null) reasons[k] = text;
  }
  return { fields, reasons };
}

export function readGpu(x: unknown, position: number): Gpu {
  const g = obj(x);
  const mem = obj(g.memory);
  const clocks = obj(g.clock_speeds);
  return {
    index: num(g.index) ?? position,
    id: str(g.id),
    uuid: str(g.uuid),
    name: str(g.name),
    pciBusId: str(g.pci_bus_id),
    utilizationPct: num(g.utilization),
    memoryUtilizationPct: num(g.memory_utilization),
    memoryTotalMib: num(mem.total),
    memoryUsedMib: num(mem.used),
    memoryFreeMib: num(mem.free),
    temperatureC: num(g.temperature),
    powerW: num(g.power_usage),
    powerLimitW: num(g.power_limit),
    fanPct: num(g.fan_speed),
    graphicsClockMhz: num(clocks.graphics),
    memoryClockMhz: num(clocks.memory),
    health: str(g.health) ?? 'unknown',
    healthMessage: str(g.health_message),
    // An agent without the verdict (older) says nothing: count the GPU healthy unless it is lost.
    healthy: typeof g.healthy === 'boolean' ? g.healthy : str(g.health) !== 'lost',
    healthProblems: arr(g.health_problems)
      .map((p) => str(obj(p).message))
      .filter((m): m is string => m !== null),
    performanceState: str(g.performance_state),
    availabilityScore: num(g.availability_score),
    processes: arr(g.processes).map(readProcess),
    migInstances: arr(g.mig_instances).map(readMigInstance),
    values: numericValues(g),
    missing: readMissing(g.missing_reasons),
  };
}

export function readSnapshot(x: unknown): Snapshot {
  const d = obj(x);
  return {
    t: parseTime(d.timestamp) ?? Date.now(),
    node: first(str(d.node), str(d.hostname)),
    backend: str(d.backend),
    simulated: d.simulated === true,
    driverVersion: str(d.driver_version),
    cudaDriverVersion: str(d.cuda_driver_version),
    warnings: arr(d.warnings).map(str).filter((w): w is string => w !== null),
    processVisibilityMessage: str(obj(d.process_visibility).message),
    gpus: arr(d.gpus).map(readGpu),
  };
}

export function readAlert(x: unknown, fallbackState: AlertState = 'firing', eventName?: string): Alert {
  const a = obj(x);
  const rule = first(str(a.rule), str(a.kind), str(a.event), str(eventName)) ?? 'alert';
  const gpuIndex = num(a.gpu_index);
  const gpuUuid = str(a.gpu_uuid);
  const resolvedAt = parseTime(a.resolved_at);
  const state: AlertState =
    a.state === 'resolved' || a.state === 'firing' ? a.state : resolvedAt !== null ? 'resolved' : fallbackState;
  const startedAt = parseTime(a.started_at);
  const id = a.id === undefined || a.id === null ? null : String(a.id);
  return {
    key: id ?? `${rule}/${gpuUuid ?? gpuIndex ?? '-'}`,
    rule,
    gpuIndex,
    gpuUuid,
    severity: str(a.severity),
    message: str(a.message),
    value: num(a.value),
    threshold: num(a.threshold),
    state,
    startedAt,
    resolvedAt,
    at: first(parseTime(a.at), state === 'resolved' ? resolvedAt : startedAt),
  };
}

function readAlerts(x: unknown): AlertsDoc {
  const d = obj(x);
  return {
    firing: arr(d.firing).map((a) => readAlert(a, 'firing')),
    recent: arr(d.recent).map((a) => readAlert(a, 'firing')),
  };
}

function readLease(x: unknown): Lease {
  const l = obj(x);
  const owner = obj(l.owner);
  return {
    id: String(l.id ?? '?'),
    name: str(l.name),
    jobId: str(l.job_id),
    gpus: arr(l.gpus)
      .map((g) => (typeof g === 'number' ? g : num(obj(g).index)))
      .filter((i): i is number => i !== null),
    ownerUser: str(owner.user),
    ownerPid: num(owner.pid),
    createdAt: parseTime(l.created_at),
  };
}

function readWaiter(x: unknown): Waiter {
  const w = obj(x);
  return {
    id: String(w.id ?? '?'),
    name: str(w.name),
    gpus: num(w.gpus) ?? (Array.isArray(w.gpus) ? w.gpus.length : null),
    priority: num(w.priority),
    ownerUser: str(obj(w.owner).user),
    enqueuedAt: parseTime(w.enqueued_at),
  };
}

function readHistory(x: unknown): HistoryDoc {
  const d = obj(x);
  return {
    metric: str(d.metric) ?? '',
    unit: str(d.unit),
    series: arr(d.series).map((s) => {
      const so = obj(s);
      return {
        gpu: num(so.gpu) ?? num(so.gpu_index) ?? 0,
        points: arr(so.points)
          .map((p) => {
            const po = obj(p);
            return { t: parseTime(po.t) ?? NaN, v: first(num(po.avg), num(po.value)) };
          })
          .filter((p) => Number.isFinite(p.t)),
      };
    }),
  };
}

// ---------------------------------------------------------------------------------------------------
// HTTP

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | null,
    message: string,
  ) {
    super(message);
  }
}

// An agent started with --auth-read wants a bearer token for reads too: the readers' token
// (--read-token-file), or the agent's own token for those who also release leases. The page keeps the
// token the user pasted in sessionStorage (gone with the tab, never on disk) and sends it on every
// request; the WebSocket, which cannot carry an Authorization header from a browser, offers it as the subprotocol
// "gpufleet.bearer.<token>" next to "gpufleet.v1" (the one the agent is to select).
const TOKEN_KEY = 'gpufleet.token';
export const auth = {
  get token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set(token: string | null): void {
    if (token) sessionStorage.setItem(TOKEN_KEY, token.trim());
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** Resolves against the page, so the dashboard also works behind a proxy under a sub-path. */
function url(path: string): URL {
  return new URL(path, document.baseURI);
}

/** GET a JSON document; a non-2xx answer throws ApiError unless its status is in `okStatuses`. */
export async function getJson(path: string, signal?: AbortSignal, okStatuses: number[] = []): Promise<unknown> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (auth.token) headers.authorization = `Bearer ${auth.token}`;
  const res = await fetch(url(path), { headers, signal, cache: 'no-store' });
  const body: unknown = await res.json().catch(() => null);
  if (!res.ok && !okStatuses.includes(res.status)) {
    const e = obj(body);
    // gpufleet's error document has `message`; the seeds' routes answer `detail` (fleet manager) or `error`.
    throw new ApiError(res.status, str(e.error), str(e.message) ?? str(e.detail) ?? str(e.error) ?? `${path}: HTTP ${res.status}`);
  }
  return body;
}

/** A state-changing request with the page's token; a non-2xx answer throws ApiError with the agent's message. */
async function send(method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (auth.token) headers.authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  const doc: unknown = await res.json().catch(() => null);
  if (!res.ok) {
    const e = obj(doc);
    throw new ApiError(res.status, str(e.error), str(e.message) ?? `${method} ${path}: HTTP ${res.status}`);
  }
  return doc;
}

const MIB_PER_UNIT: Record<string, number> = { MiB: 1, MB: 1e6 / 2 ** 20, GiB: 1024, GB: 1e9 / 2 ** 20, B: 2 ** -20, bytes: 2 ** -20 };

export const api = {
  snapshot: async (signal?: AbortSignal) => readSnapshot(await getJson('api/v1/monitoring/gpu-metrics', signal)),
  /** The agent's metric table: keys, labels, units, history names, and the texts of missing reasons. */
  fields: async (signal?: AbortSignal) => readFields(await getJson('api/v1/fields', signal)),
  alerts: async (signal?: AbortSignal) => readAlerts(await getJson('api/v1/alerts', signal)),
  leases: async (signal?: AbortSignal): Promise<LeasesDoc> => {
    const d = obj(await getJson('api/v1/leases', signal));
    return { leases: arr(d.leases).map(readLease), waiting: arr(d.waiting).map(readWaiter) };
  },
  jobs: async (signal?: AbortSignal) => arr(obj(await getJson('api/v1/jobs?series=false', signal)).jobs).map(readJob),
  session: async (signal?: AbortSignal): Promise<Session> => {
    const d = obj(await getJson('api/v1/session', signal));
    return { writer: d.writer === true, jobsSubmit: d.jobs_submit === true };
  },
  submitJob: async (r: JobRequest): Promise<Job> => readJob(await send('POST', 'api/v1/jobs', r)),
  cancelJob: async (id: string): Promise<void> => {
    await send('DELETE', `api/v1/jobs/${encodeURIComponent(id)}`);
  },
  /** The agent answers 503 with the same document when it is degraded. */
  health: async (signal?: AbortSignal): Promise<AgentHealth> => {
    const d = obj(await getJson('api/health', signal, [503]));
    return { status: str(d.status), problems: arr(d.problems).map(str).filter((p): p is string => p !== null) };
  },
  /** All GPUs' series for one metric; `since` as the server accepts it ("15m", epoch seconds, ISO). */
  history: async (metric: ChartMetric, since: string, signal?: AbortSignal) => {
    const doc = readHistory(await getJson(`api/v1/history?metric=${encodeURIComponent(metric)}&since=${encodeURIComponent(since)}`, signal));
    // Memory is charted in MiB, as the snapshot gives it.
    const scale = metric === 'memory_used' ? MIB_PER_UNIT[doc.unit ?? 'MiB'] ?? 1 : 1;
    if (scale !== 1) for (const s of doc.series) for (const p of s.points) if (p.v !== null) p.v *= scale;
    return doc;
  },
};

// ---------------------------------------------------------------------------------------------------
// WebSocket

export type LinkState = 'connecting' | 'live' | 'reconnecting';

export interface LiveHandlers {
  /** A full document: on connect (`initial`) and on every update. */
  snapshot(s: Snapshot, initial: boolean): void;
  alert(a: Alert): void;
  period(ms: number): void;
  state(s: LinkState, retryInMs?: number): void;
}

/**
 * The /ws stream, reconnecting with jittered exponential backoff (0.5 s doubling to 15 s) after it
 * closes. The chosen update period is re-sent on every connect, so a reconnect keeps it.
 */
export class LiveLink {
  private ws: WebSocket | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private attempt = 0;
  private closed = false;

  constructor(
    private readonly handlers: LiveHandlers,
    private periodMs: number,
  ) {}

  start(): void {
    this.closed = false;
    this.connect();
  }

  stop(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.ws?.close();
    this.ws = null;
  }

  setPeriod(ms: number): void {
    this.periodMs = ms;
    this.send({ event: 'set_period', data: { period_ms: ms } });
  }

  requestUpdate(): void {
    this.send({ event: 'request_gpu_update' });
  }

  private send(msg: unknown): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  private connect(): void {
    const u = url(`ws?period_ms=${this.periodMs}`);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    this.handlers.state(this.attempt === 0 ? 'connecting' : 'reconnecting');
    const ws = auth.token ? new WebSocket(u, ['gpufleet.v1', `gpufleet.bearer.${auth.token}`]) : new WebSocket(u);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.handlers.state('live');
      // The query parameter already asks for it; this covers a server that ignores the query.
      this.send({ event: 'set_period', data: { period_ms: this.periodMs } });
    };
    ws.onmessage = (ev) => this.dispatch(ev.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) return;
      const delay = Math.min(15000, 500 * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
      this.attempt++;
      this.handlers.state('reconnecting', delay);
      this.timer = setTimeout(() => this.connect(), delay);
    };
    // onerror is always followed by onclose, which schedules the retry.
  }

  private dispatch(raw: unknown): void {
    if (typeof raw !== 'string') return;
    let msg: Json;
    try {
      msg = obj(JSON.parse(raw));
    } catch {
      return;
    }
    const event = str(msg.event) ?? str(msg.type) ?? '';
    if (event === 'gpu_status' || event === 'gpu_status_update') {
      this.handlers.snapshot(readSnapshot(msg.data), event === 'gpu_status');
    } else if (event === 'period') {
      const ms = num(obj(msg.data).period_ms);
      if (ms !== null) this.handlers.period(ms);
    } else if (event.endsWith('_alert')) {
      this.handlers.alert(readAlert(msg.data, 'firing', event));
    }
  }
}
