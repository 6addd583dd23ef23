import type { Gpu } from '../api';
import { fmtInt, NA, pct } from '../format';

/**
 * A GPU's MIG instances under its card: profile, the full MIG UUID (what CUDA_VISIBLE_DEVICES takes; a
 * click selects it for copying), the GPU/compute instance ids and the instance's memory. Nothing when MIG
 * is off. The instances' memory is part of the GPU's meter above, never added to it.
 */
export function MigInstances({ gpu }: { gpu: Gpu }) {
  if (gpu.migInstances.length === 0) return null;
  return (
    <section class="mig" aria-label={`MIG instances of GPU ${gpu.index}`}>
      <h4>MIG instances</h4>
      <table>
        <tbody>
          {gpu.migInstances.map((m) => {
            const used = pct(m.memoryUsedMib, m.memoryTotalMib);
            return (
              <tr key={m.uuid ?? String(m.index)} data-mig-uuid={m.uuid ?? ''}>
                <td class="mig-profile">{m.profile ?? NA}</td>
                <td class="mig-ids" title="GPU instance / compute instance">
                  GI {m.gpuInstanceId ?? NA} · CI {m.computeInstanceId ?? NA}
                </td>
                <td class="mig-mem num" title={used === null ? undefined : `${Math.round(used)} % used`}>
                  {m.memoryUsedMib === null ? NA : fmtInt(m.memoryUsedMib)} / {m.memoryTotalMib === null ? NA : fmtInt(m.memoryTotalMib)} MiB
                </td>
                <td class="mig-uuid">
                  <code>{m.uuid ?? NA}</code>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
