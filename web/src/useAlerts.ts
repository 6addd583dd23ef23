// The alerts the node view shows: the agent's document (GET /api/v1/alerts, read at start and again after
// the live link reconnects, since events may have been missed meanwhile), kept current by the alerts that
// arrive over the live link.
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { api, type Alert } from './api';
import { useResource } from './useResource';

const RECENT_MAX = 50;

/** One alert episode: the same rule on the same GPU from one start to its resolve. */
const episode = (a: Alert) => `${a.key}@${a.startedAt ?? a.at ?? ''}`;

/** Recent episodes, newest event first, one row each (a resolve replaces its firing row). */
function mergeRecent(prev: Alert[], incoming: Alert[]): Alert[] {
  const byEpisode = new Map<string, Alert>();
  for (const a of [...prev, ...incoming]) {
    const had = byEpisode.get(episode(a));
    if (!had || had.state !== 'resolved') byEpisode.set(episode(a), a);
  }
  return [...byEpisode.values()].sort((a, b) => (b.at ?? 0) - (a.at ?? 0)).slice(0, RECENT_MAX);
}

export interface Alerts {
  /** Firing alerts, the latest start first. */
  firing: Alert[];
  recent: Alert[];
  /** Why the document could not be read (shown in the Alerts panel while it is retried). */
  error: string | null;
  /** An alert from the live link. */
  onAlert: (a: Alert) => void;
  /** Reads the document again (after a reconnect). */
  reload: () => void;
}

export function useAlerts(): Alerts {
  const doc = useResource((signal) => api.alerts(signal), []);
  const [firing, setFiring] = useState<Map<string, Alert>>(new Map());
  const [recent, setRecent] = useState<Alert[]>([]);
  useEffect(() => {
    if (!doc.data) return;
    setFiring(new Map(doc.data.firing.map((a) => [a.key, a])));
    setRecent(mergeRecent([], doc.data.recent));
  }, [doc.data]);

  const onAlert = useCallback((a: Alert) => {
    setFiring((prev) => {
      const next = new Map(prev);
      if (a.state === 'firing') next.set(a.key, a);
      else {
        next.delete(a.key);
        // A resolve without the firing alert's id: match it by rule and GPU.
        for (const [k, f] of next) if (f.rule === a.rule && f.gpuIndex === a.gpuIndex && f.gpuUuid === a.gpuUuid) next.delete(k);
      }
      return next;
    });
    setRecent((prev) => mergeRecent(prev, [a]));
  }, []);

  const firingList = useMemo(() => [...firing.values()].sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0)), [firing]);
  return {
    firing: firingList,
    recent,
    error: doc.error === null ? null : `cannot read the alerts: ${doc.error}; retrying`,
    onAlert,
    reload: doc.reload,
  };
}
