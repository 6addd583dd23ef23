// The dashboard: the header and the tab bar over the view the URL names (router.ts). The app-wide data
// lives in hooks: the live link and the charts' stores (useLive), the alerts (useAlerts), and every
// document it reads (useResource: the field table, the first snapshot, leases, jobs and health).
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from './api';
import { ClusterView } from './components/Cluster';
import { ExperimentsView } from './components/Experiments';
import { GpuPage } from './components/GpuPage';
import { Header } from './components/Header';
import { NodeView } from './components/NodeView';
import { ViewTabs } from './components/ViewTabs';
import { fmtClock } from './format';
import { useRoute, viewOfRoute } from './router';
import { useAlerts } from './useAlerts';
import { useLive } from './useLive';
import { useResource } from './useResource';

/** How often leases, jobs and the agent's health are read again. */
const POLL_MS = 10_000;

function useDarkScheme(): boolean {
  const mq = useMemo(() => window.matchMedia('(prefers-color-scheme: dark)'), []);
  const [dark, setDark] = useState(mq.matches);
  useEffect(() => {
    const on = () => setDark(mq.matches);
    mq.addEventListener('change', on);
    return () => mq.removeEventListener('change', on);
  }, [mq]);
  return dark;
}

export function App() {
  const dark = useDarkScheme();
  const route = useRoute();
  const view = viewOfRoute(route);
  // The charts need the field table: without it there are none.
  const fields = useResource((signal) => api.fields(signal), []);
  const alerts = useAlerts();
  const live = useLive(fields.data, { alert: alerts.onAlert, reconnected: alerts.reload });
  // Something to show at once even if the socket is slow or blocked by a proxy.
  const first = useResource((signal) => api.snapshot(signal), []);
  const leases = useResource((signal) => api.leases(signal), [], { poll: POLL_MS });
  const jobs = useResource((signal) => api.jobs(signal), [], { poll: POLL_MS });
  const health = useResource((signal) => api.health(signal), [], { poll: POLL_MS });
  const snap = live.snap ?? first.data;
  const agentHealth = health.error === null ? health.data : null;
  const loadErr = first.error !== null && live.snap === null && live.link !== 'live' ? `cannot read from the agent: ${first.error}` : null;

  return (
    <>
      <Header
        snap={snap}
        link={live.link}
        retryInMs={live.retryIn}
        alertsFiring={alerts.firing.length}
        health={agentHealth?.status ?? null}
        periodMs={live.periodMs}
        onPeriod={live.setPeriod}
      />
      <ViewTabs view={view} />
      {view === 'cluster' && <ClusterView />}
      {view === 'experiments' && <ExperimentsView route={route} dark={dark} fields={fields.data} />}
      {view === 'gpu' && <GpuPage route={route} snap={snap} fields={fields.data} dark={dark} />}
      {view === 'node' && (
        <NodeView
          route={route}
          dark={dark}
          live={live}
          snap={snap}
          fields={fields}
          alerts={alerts}
          leases={leases}
          jobs={jobs}
          health={agentHealth}
          loadErr={loadErr}
          needToken={first.status === 401}
        />
      )}
      <footer class="foot">
        gpufleet agent dashboard · {view === 'node' ? 'charts show the last hour · ' : ''}
        {snap ? `last sample ${fmtClock(snap.t)}` : ''}
      </footer>
    </>
  );
}
