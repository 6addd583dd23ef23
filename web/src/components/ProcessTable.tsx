// The processes on GPUs as a table, largest memory first: the node view's (every GPU, with a GPU column)
// and a GPU page's (that GPU's only).
import type { GpuProcess } from '../api';
import { fmtMib, NA } from '../format';

export interface ProcessRow {
  gpu: number;
  p: GpuProcess;
}

export function ProcessTable({ rows, showGpu }: { rows: ProcessRow[]; showGpu: boolean }) {
  const sorted = [...rows].sort((a, b) => (b.p.memoryMib ?? -1) - (a.p.memoryMib ?? -1));
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th class="num">pid</th>
            <th>user</th>
            <th>name / command</th>
            <th>container</th>
            {showGpu && <th class="num">GPU</th>}
            <th class="num">memory</th>
          </tr>
        </thead>
        <tbody>
          {sorted.map(({ gpu, p }) => (
            <tr key={`${gpu}/${p.pid ?? p.name ?? ''}`} data-pid={p.pid ?? ''}>
              <td class="num pid">{p.pid ?? NA}</td>
              <td>{p.user ?? NA}</td>
              <td class="command" title={p.command ?? ''}>
                <strong>{p.name ?? NA}</strong>
                {p.command && p.command !== p.name && <span class="muted"> {p.command}</span>}
              </td>
              <td>{p.container ?? '—'}</td>
              {showGpu && (
                <td class="num" title={p.migUuid ?? undefined}>
                  {gpu}
                  {p.migProfile !== null ? <span class="mig-profile"> {p.migProfile}</span> : p.gpuInstanceId !== null ? ` GI ${p.gpuInstanceId}` : ''}
                </td>
              )}
              <td class="num">{fmtMib(p.memoryMib)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
