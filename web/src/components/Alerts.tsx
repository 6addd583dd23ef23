import type { Alert } from '../api';
import { fmtAgo, fmtNum, fmtTime, NA, ruleLabel } from '../format';

function gpuLabel(a: Alert): string {
  return a.gpuIndex === null ? NA : `GPU ${a.gpuIndex}`;
}

export function Alerts({ firing, recent, now, error = null }: { firing: Alert[]; recent: Alert[]; now: number; error?: string | null }) {
  return (
    <section class="panel" id="alerts">
      <h2>
        Alerts <span class={`count ${firing.length ? 'firing' : ''}`}>{firing.length} firing</span>
      </h2>
      {error && <p class="error">{error}</p>}
      {firing.length === 0 ? (
        <p class="empty">Nothing firing.</p>
      ) : (
        <ul class="alerts firing-list" id="alerts-firing-list">
          {firing.map((a) => (
            <li key={a.key} class={`alert sev-${a.severity ?? 'unknown'}`} data-rule={a.rule}>
              <span class="badge sev">{a.severity ?? NA}</span>
              <span class="what">
                <strong>{ruleLabel(a.rule)}</strong> · {gpuLabel(a)}
              </span>
              <span class="msg">{a.message ?? `value ${fmtNum(a.value, 1)} (threshold ${fmtNum(a.threshold, 1)})`}</span>
              <span class="when" title={fmtTime(a.startedAt)}>
                since {fmtAgo(a.startedAt, now)}
              </span>
            </li>
          ))}
        </ul>
      )}
      <h3>Recent</h3>
      {recent.length === 0 ? (
        <p class="empty">No alert events yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="events" id="alerts-recent">
            <thead>
              <tr>
                <th>time</th>
                <th>state</th>
                <th>rule</th>
                <th>GPU</th>
                <th>message</th>
              </tr>
            </thead>
            <tbody>
              {recent.map((a, i) => (
                <tr key={`${a.key}@${a.startedAt ?? i}`} class={a.state}>
                  <td class="nowrap">{fmtTime(a.at)}</td>
                  <td>
                    <span class={`badge state ${a.state}`}>{a.state}</span>
                  </td>
                  <td>{ruleLabel(a.rule)}</td>
                  <td>{gpuLabel(a)}</td>
                  <td>{a.message ?? NA}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
