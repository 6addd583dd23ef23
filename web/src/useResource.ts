// A document fetched for a view, with its failure shown in place and retried: every request the dashboard
// makes for a view (the node view's leases, jobs, health, alerts and field table, the GPU page, the
// experiments pages, the Cluster tab's probe) goes through this one hook and its one retry policy, so a
// failed request never leaves a blank page and recovers on its own. Not through it: the live link (api.ts's
// LiveLink, which reconnects on its own), the history merged into the live charts (useLive), and the
// Cluster view's fleet poll (components/Cluster.tsx, a state machine of its own).
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Resource<T> {
  /** The last document loaded, possibly for the previous `deps` until the new one arrives. */
  data: T | null;
  /** The document loaded for the current `deps`, null until it arrives. */
  current: T | null;
  /** The last failure's text; null once a request succeeds again. */
  error: string | null;
  /** The last failure's HTTP status (ApiError), null for a network failure or none. */
  status: number | null;
  /** When the next attempt is due after a failure (epoch ms), for "retrying in …". */
  retryAt: number | null;
  /** Loads again now (a failure's "retry now", or data known to have changed). */
  reload: () => void;
}

export interface ResourceOptions<T> {
  /** After a success, load again after this many ms (or what the function says for this document;
   *  undefined or 0: not again). */
  poll?: number | ((data: T) => number | undefined);
}

const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 15_000;

interface State<T> {
  data: T | null;
  /** The `deps` generation `data` was loaded for. */
  gen: number;
  error: string | null;
  status: number | null;
  retryAt: number | null;
}

/**
 * Loads with `load` whenever `deps` change (the previous request is aborted; its data stays in `data` until
 * the new one arrives). After a failure it retries with doubling delays, 1 s up to 15 s (not after a 404:
 * that is the agent's answer, "no GPU 9 on this node"); after a success it loads again as `poll` says.
 */
export function useResource<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], options: ResourceOptions<T> = {}): Resource<T> {
  const [state, setState] = useState<State<T>>({ data: null, gen: -1, error: null, status: null, retryAt: null });
  const [tick, setTick] = useState(0);
  const gen = useRef(0);
  const lastDeps = useRef<unknown[] | null>(null);
  if (lastDeps.current === null || deps.length !== lastDeps.current.length || deps.some((d, i) => !Object.is(d, lastDeps.current![i]))) {
    if (lastDeps.current !== null) gen.current++;
    lastDeps.current = deps;
  }
  const pollRef = useRef(options.poll);
  pollRef.current = options.poll;
  useEffect(() => {
    const ctl = new AbortController();
    const myGen = gen.current;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failures = 0;
    const attempt = () => {
      load(ctl.signal).then(
        (data) => {
          if (ctl.signal.aborted) return;
          failures = 0;
          setState({ data, gen: myGen, error: null, status: null, retryAt: null });
          const p = pollRef.current;
          const ms = typeof p === 'function' ? p(data) : p;
          if (ms) timer = setTimeout(attempt, ms);
        },
        (e: unknown) => {
          if (ctl.signal.aborted) return;
          const text = e instanceof Error ? e.message : String(e);
          const status = e instanceof ApiError ? e.status : null;
          if (status === 404) {
            setState({ data: null, gen: myGen, error: text, status, retryAt: null });
            return;
          }
          const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** failures++);
          setState((s) => ({ ...s, error: text, status, retryAt: Date.now() + delay }));
          timer = setTimeout(attempt, delay);
        },
      );
    };
    attempt();
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
    // The caller names what the request depends on.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useRef(() => setTick((n) => n + 1)).current;
  return {
    data: state.data,
    current: state.gen === gen.current ? state.data : null,
    error: state.error,
    status: state.status,
    retryAt: state.retryAt,
    reload,
  };
}
