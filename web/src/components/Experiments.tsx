// PLACEHOLDER on branch i14-base: the experiments helper replaces this file.
import type { Route } from '../router';

export function ExperimentsView({ route }: { route: Route; dark: boolean }) {
  return <main id="experiments">experiments {route.path.join('/')}</main>;
}
