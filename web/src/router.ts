// Hash routing: every view has a URL (`#/gpus/3?range=6h`, `#/experiments/42`), so a link, a reload and
// back/forward all land on the same view. The hash is the only state; components read it with useRoute().
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** Path segments after `#/`, decoded: `#/gpus/3` → ['gpus', '3']; `#/` or no hash → []. */
  path: string[];
  /** The query after `?` in the hash. */
  query: URLSearchParams;
}

export function parseHash(hash: string): Route {
  let h = hash.startsWith('#') ? hash.slice(1) : hash;
  const q = h.indexOf('?');
  const query = new URLSearchParams(q >= 0 ? h.slice(q + 1) : '');
  if (q >= 0) h = h.slice(0, q);
  const path = h
    .split('/')
    .filter((s) => s.length > 0)
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  return { path, query };
}

/** `#/a/b?k=v` for ['a', 'b'] and {k: 'v'} (undefined, null and '' values are left out). */
export function href(path: (string | number)[], query: Record<string, string | number | null | undefined> = {}): string {
  const p = path.map((s) => encodeURIComponent(String(s))).join('/');
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `#/${p}${qs ? `?${qs}` : ''}`;
}

/** Goes to a view. replace: changes the URL without a new history entry (a filter being typed, say). */
export function navigate(to: string, replace = false): void {
  if (replace) {
    history.replaceState(history.state, '', to);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    location.hash = to;
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** The dashboard's views: this node (`#/`), one of its GPUs, the experiments pages, the fleet. */
export type View = 'node' | 'cluster' | 'experiments' | 'gpu';

/** Which view a route shows: `#/cluster`, `#/experiments[/ID]`, `#/gpus/N`; anything else is this node. */
export function viewOfRoute(route: Route): View {
  const [first, second] = route.path;
  if (first === 'cluster') return 'cluster';
  if (first === 'experiments') return 'experiments';
  if (first === 'gpus' && second !== undefined) return 'gpu';
  return 'node';
}
