// Which metrics the node view charts: every field of the agent's table that has a history (GET
// /api/v1/fields, history_metric), ticked or not. At least one stays ticked.
import type { ChartMetric, FieldsDoc } from '../api';

export function ChartPicker({ fields, charted, onChange }: { fields: FieldsDoc; charted: ChartMetric[]; onChange: (next: ChartMetric[]) => void }) {
  const choices = fields.fields.filter((f) => f.historyMetric !== null);
  const shown = choices.filter((f) => charted.includes(f.historyMetric!)).length;
  return (
    <details class="chart-picker" id="chart-picker">
      <summary>
        metrics <span class="count">{shown}</span>
      </summary>
      <fieldset>
        <legend class="visually-hidden">metrics to chart</legend>
        {choices.map((f) => {
          const m = f.historyMetric!;
          const on = charted.includes(m);
          return (
            <label key={m} title={f.description ?? ''}>
              <input
                type="checkbox"
                name={m}
                checked={on}
                disabled={on && shown === 1}
                onChange={() => onChange(on ? charted.filter((x) => x !== m) : [...charted, m])}
              />{' '}
              {f.label}
              {f.unit && <span class="muted"> ({f.unit})</span>}
            </label>
          );
        })}
      </fieldset>
    </details>
  );
}
