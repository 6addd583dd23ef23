// Active leases and recent jobs, polled by the app every ~10 s.
import type { Job, LeasesDoc } from '../api';
import { fmtAgo, fmtDuration, fmtTime, NA } from '../format';
import { href } from '../router';

const gpuList = (gs: number[]) => (gs.length ? gs.join(', ') : NA);

export function Leases({ doc, error, now }: { doc: LeasesDoc | null; error: string | null; now: number }) {
  const leases = doc?.leases ?? null;
  const waiting = doc?.waiting ?? [];
  return (
    <section class="panel" id="leases">
      <h2>Active leases {leases && <span class="count">{leases.length}</span>}</h2>
      {error && <p class="error">{error}</p>}
      {leases === null ? (
        !error && <p class="empty">Loading…</p>
      ) : leases.length === 0 ? (
        <p class="empty">No GPUs leased.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>lease</th>
                <th>name</th>
                <th>GPUs</th>
                <th>owner</th>
                <th>job</th>
                <th>since</th>
              </tr>
            </thead>
            <tbody>
              {leases.map((l) => (
                <tr key={l.id}>
                  <td class="mono">{l.id}</td>
                  <td>{l.name ?? NA}</td>
                  <td>{gpuList(l.gpus)}</td>
                  <td>
                    {l.ownerUser ?? NA}
                    {l.ownerPid !== null && <span class="muted"> (pid {l.ownerPid})</span>}
                  </td>
                  <td class="mono">{l.jobId ?? '—'}</td>
                  <td class="nowrap" title={fmtTime(l.createdAt)}>
                    {fmtAgo(l.createdAt, now)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {waiting.length > 0 && (
        <>
          <h3>Waiting for GPUs ({waiting.length})</h3>
          <div class="table-wrap">
            <table id="waiting">
              <thead>
                <tr>
                  <th>id</th>
                  <th>name</th>
                  <th class="num">GPUs</th>
                  <th class="num">priority</th>
                  <th>owner</th>
                  <th>waiting</th>
                </tr>
              </thead>
              <tbody>
                {waiting.map((w) => (
                  <tr key={w.id}>
                    <td class="mono">{w.id}</td>
                    <td>{w.name ?? NA}</td>
                    <td class="num">{w.gpus ?? NA}</td>
                    <td class="num">{w.priority ?? NA}</td>
                    <td>{w.ownerUser ?? NA}</td>
                    <td class="nowrap" title={fmtTime(w.enqueuedAt)}>
                      {fmtAgo(w.enqueuedAt, now)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

export function Jobs({ jobs, error, now }: { jobs: Job[] | null; error: string | null; now: number }) {
  const shown = jobs?.slice(0, 20) ?? null;
  return (
    <section class="panel" id="jobs">
      <h2>Recent jobs {jobs && <span class="count">{jobs.length}</span>}</h2>
      {error && <p class="error">{error}</p>}
      {shown === null ? (
        !error && <p class="empty">Loading…</p>
      ) : shown.length === 0 ? (
        <p class="empty">
          No jobs recorded yet (<code>gpufleet run --gpus N -- CMD</code>).
        </p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>job</th>
                <th>status</th>
                <th>name / command</th>
                <th>GPUs</th>
                <th>started</th>
                <th>duration</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((j) => (
                <tr key={j.id}>
                  <td class="mono">
                    <a href={href(['experiments', j.id])}>{j.id}</a>
                  </td>
                  <td class="nowrap">
                    <span class={`badge job ${j.status ?? 'unknown'}`}>{j.status ?? NA}</span>
                    {j.exitCode !== null && j.exitCode !== 0 && <span class="muted"> exit {j.exitCode}</span>}
                  </td>
                  <td class="command" title={j.command ?? ''}>
                    <strong>{j.name ?? NA}</strong>
                    {j.command && j.command !== j.name && <span class="muted"> {j.command}</span>}
                  </td>
                  <td title={j.gpuModel ?? ''}>{gpuList(j.gpuIndices)}</td>
                  <td class="nowrap" title={fmtTime(j.startedAt)}>
                    {fmtAgo(j.startedAt, now)}
                  </td>
                  <td class="nowrap">{j.endedAt === null ? (j.startedAt !== null ? 'running' : NA) : fmtDuration(j.startedAt, j.endedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
