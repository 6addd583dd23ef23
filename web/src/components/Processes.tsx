import type { Gpu } from '../api';
import { fmtMib, NA } from '../format';

export function Processes({ gpus, visibilityMessage }: { gpus: Gpu[]; visibilityMessage: string | null }) {
  const rows = gpus
    .flatMap((g) => g.processes.map((p) => ({ gpu: g.index, p })))
    .sort((a, b) => (b.p.memoryMib ?? -1) - (a.p.memoryMib ?? -1));
  return (
    <section class="panel" id="processes">
      <h2>Processes <span class="count">{rows.length}</span></h2>
      {visibilityMessage && <p class="note">{visibilityMessage}</p>}
      {rows.length === 0 ? (
        <p class="empty">No processes on the GPUs.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th class="num">pid</th>
                <th>user</th>
                <th>name / command</th>
                <th>container</th>
                <th class="num">GPU</th>
                <th class="num">memory</th>
              </tr>
            </thead>
            <tbody>
              {rows.map(({ gpu, p }) => (
                <tr key={`${gpu}/${p.pid}`} data-pid={p.pid ?? ''}>
                  <td class="num pid">{p.pid ?? NA}</td>
                  <td>{p.user ?? NA}</td>
                  <td class="command" title={p.command ?? ''}>
                    <strong>{p.name ?? NA}</strong>
                    {p.command && p.command !== p.name && <span class="muted"> {p.command}</span>}
                  </td>
                  <td>{p.container ?? '—'}</td>
                  <td class="num" title={p.migUuid ?? undefined}>
                    {gpu}
                    {p.migProfile !== null ? <span class="mig-profile"> {p.migProfile}</span> : p.gpuInstanceId !== null ? ` GI ${p.gpuInstanceId}` : ''}
                  </td>
                  <td class="num">{fmtMib(p.memoryMib)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
