// The tab bar over every view: this node (and its GPUs' pages), the experiments pages, and the Cluster
// view where the agent has the fleet routes.
import { clusterApi } from '../cluster';
import type { View } from '../router';
import { useResource } from '../useResource';

/**
 * Whether to offer the Cluster tab: true once the agent answers the fleet routes (with a document, or
 * with 503 when no fleet is configured: the tab then says how to configure one), false when it has no
 * such routes. Until the agent can be asked, null (asked again as useResource retries).
 */
function useClusterRoutes(): boolean | null {
  return useResource((signal) => clusterApi.available(signal), []).data;
}

export function ViewTabs({ view }: { view: View }) {
  const clusterRoutes = useClusterRoutes();
  const tab = (id: string, to: string, label: string, active: boolean) => (
    <a href={to} id={id} class={active ? 'active' : ''} aria-current={active ? 'page' : undefined}>
      {label}
    </a>
  );
  return (
    <nav class="views" aria-label="views">
      {tab('tab-node', '#/', 'This node', view === 'node' || view === 'gpu')}
      {tab('tab-experiments', '#/experiments', 'Experiments', view === 'experiments')}
      {(clusterRoutes === true || view === 'cluster') && tab('tab-cluster', '#/cluster', 'Cluster', view === 'cluster')}
    </nav>
  );
}
