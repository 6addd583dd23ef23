// A document fetched for a view, with its failure shown in place and retried: every request that feeds a
// view goes through this, so a failed one never leaves a blank page and recovers on its own.
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Resource<T> {
  data: T | null;
  /** The last failure's text; null once a request succeeds again. */
  error: string | null;
  /** When the next attempt is due after a failure (epoch ms), for "retrying in …". */
  retryAt: number | null;
}

const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 15_000;

/**
 * Loads with `load` whenever `deps` change (the previous request is aborted; its data stays shown until
 * the new one arrives). After a failure it retries with doubling delays (not after a 404); after a success it loads again
 * every `refreshMs` when one is given.
 */
export function useResource<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], refreshMs?: number): Resource<T> {
  const [state, setState] = useState<Resource<T>>({ data: null, error: null, retryAt: null });
  useEffect(() => {
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failures = 0;
    const attempt = () => {
      load(ctl.signal).then(
        (data) => {
          if (ctl.signal.aborted) return;
          failures = 0;
          setState({ data, error: null, retryAt: null });
          if (refreshMs) timer = setTimeout(attempt, refreshMs);
        },
        (e: unknown) => {
          if (ctl.signal.aborted) return;
          const text = e instanceof Error ? e.message : String(e);
          // A 404 is the agent's answer, not a failure to get one ("no GPU 9 on this node"): not retried.
          if (e instanceof ApiError && e.status === 404) {
            setState({ data: null, error: text, retryAt: null });
            return;
          }
          const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** failures++);
          setState((s) => ({ data: s.data, error: text, retryAt: Date.now() + delay }));
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
  }, deps);
  return state;
}
