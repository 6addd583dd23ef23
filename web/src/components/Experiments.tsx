// The experiments pages: `#/experiments` (recorded runs, newest first, paged and filtered on the server,
// the filters in the URL; filtered to one task, that task's totals head the list), `#/experiments?view=tasks`
// (each task grid under its heading with its totals and its newest runs) and `#/experiments/ID` (one run:
// the seed's GPU Monitoring section, energy, p95, lease, efficiency). "Experiments" is the seeds' word for
// the pages; what they read are jobs (GET /api/v1/jobs, /api/v1/jobs/{id}, /api/v1/tasks). Labels and units
// of the metrics come from the agent's field table (GET /api/v1/fields). The lists are in ExperimentList.tsx,
// one run in ExperimentDetail.tsx.
import type { FieldsDoc } from '../api';
import type { Route } from '../router';
import { ErrorBoundary } from './ErrorBoundary';
import { Detail } from './ExperimentDetail';
import { List, Tasks } from './ExperimentList';

interface ViewProps {
  route: Route;
  dark: boolean;
  fields: FieldsDoc | null;
}

/** A render error below shows in place of the view (the header and tabs stay), with "try again". */
export function ExperimentsView(props: ViewProps) {
  return (
    <main id="experiments" class="experiments">
      <ErrorBoundary what="The experiments view">
        <ExperimentsBody {...props} />
      </ErrorBoundary>
    </main>
  );
}

function ExperimentsBody({ route, dark, fields }: ViewProps) {
  const id = route.path[1];
  return id ? <Detail id={id} dark={dark} fields={fields} /> : route.query.get('view') === 'tasks' ? <Tasks route={route} /> : <List route={route} />;
}
