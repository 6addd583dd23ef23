import type { Gpu } from '../api';
import { ProcessTable } from './ProcessTable';

export function Processes({ gpus, visibilityMessage }: { gpus: Gpu[]; visibilityMessage: string | null }) {
  const rows = gpus.flatMap((g) => g.processes.map((p) => ({ gpu: g.index, p })));
  return (
    <section class="panel" id="processes">
      <h2>Processes <span class="count">{rows.length}</span></h2>
      {visibilityMessage && <p class="note">{visibilityMessage}</p>}
      {rows.length === 0 ? <p class="empty">No processes on the GPUs.</p> : <ProcessTable rows={rows} showGpu={true} />}
    </section>
  );
}
