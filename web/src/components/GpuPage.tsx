// PLACEHOLDER on branch i14-base: the per-GPU page helper replaces this file.
import type { FieldsDoc, Snapshot } from '../api';
import type { Route } from '../router';

export function GpuPage({ route }: { route: Route; snap: Snapshot | null; fields: FieldsDoc | null; dark: boolean }) {
  return <main id="gpu-page">gpu {route.path[1]}</main>;
}
