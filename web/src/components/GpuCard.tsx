import { Component } from 'preact';
import type { FieldsDoc, Gpu } from '../api';
import { fmtMib, fmtNum, gpuColor, NA, pct } from '../format';
import { href } from '../router';

function Bar({ value, label }: { value: number | null; label: string }) {
  return (
    <div class="bar" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={value ?? undefined}>
      <div class={`fill ${value === null ? 'unknown' : value >= 90 ? 'hot' : value >= 70 ? 'warm' : ''}`} style={{ width: `${value ?? 0}%` }} />
    </div>
  );
}

/** Why the values of `keys` are missing, for a tooltip: "fan: not supported". Empty when none is. Labels
 *  and texts come from the agent's field table; until it has arrived, the key and the code stand in. */
function why(gpu: Gpu, doc: FieldsDoc | null, keys: string[]): string {
  return keys
    .filter((k) => gpu.missing[k] !== undefined)
    .map((k) => {
      const label = doc?.fields.find((f) => f.key === k)?.label ?? k;
      const code = gpu.missing[k];
      return `${label}: ${doc?.reasons[code] ?? code.replace(/_/g, ' ')}`;
    })
    .join('; ');
}

function Stat({ label, value, cls, title }: { label: string; value: string; cls?: string; title?: string }) {
  return (
    <div class={`stat ${cls ?? ''}`}>
      <span class="label">{label}</span>
      <span class={`value ${value === NA ? 'na' : ''}`} title={title || undefined}>
        {value}
      </span>
    </div>
  );
}

interface CardProps {
  gpu: Gpu;
  fields: FieldsDoc | null;
}

/**
 * A GPU card that is not re-rendered while it is off screen: with 64 GPUs most cards are, and re-rendering
 * them all took about half of a live update's script time. It catches up with the latest reading when it
 * comes within 200 px of the viewport.
 */
export class GpuCard extends Component<CardProps, { near: boolean }> {
  state = { near: true };
  private io: IntersectionObserver | null = null;
  private readonly observe = (el: Element | null) => {
    this.io?.disconnect();
    this.io = null;
    if (!el || typeof IntersectionObserver === 'undefined') return;
    this.io = new IntersectionObserver((entries) => this.setState({ near: entries[entries.length - 1].isIntersecting }), { rootMargin: '200px' });
    this.io.observe(el);
  };

  shouldComponentUpdate(_next: CardProps, next: { near: boolean }): boolean {
    return next.near;
  }

  componentWillUnmount() {
    this.io?.disconnect();
  }

  render() {
    return <GpuCardBody gpu={this.props.gpu} fields={this.props.fields} cardRef={this.observe} />;
  }
}

function GpuCardBody({ gpu, fields, cardRef }: CardProps & { cardRef: (el: Element | null) => void }) {
  const lost = gpu.health !== 'ok';
  const tip = (...keys: string[]) => why(gpu, fields, keys);
  const memPct = pct(gpu.memoryUsedMib, gpu.memoryTotalMib);
  const power =
    gpu.powerW === null && gpu.powerLimitW === null ? NA : `${fmtNum(gpu.powerW, 0)} / ${fmtNum(gpu.powerLimitW, 0)} W`;
  const clocks =
    gpu.graphicsClockMhz === null && gpu.memoryClockMhz === null
      ? NA
      : `${fmtNum(gpu.graphicsClockMhz)} / ${fmtNum(gpu.memoryClockMhz)} MHz`;
  return (
    <article class={`gpu-card ${lost ? 'lost' : ''}`} data-gpu-index={gpu.index} data-health={gpu.health} ref={cardRef}>
      <header>
        <span class="swatch" style={{ background: gpuColor(gpu.index) }} aria-hidden="true" />
        <a class="gpu-index" href={href(['gpus', gpu.index])} title={`GPU ${gpu.index}: identity, processes and history`}>
          GPU {gpu.index}
        </a>
        <span class="gpu-name" title={gpu.uuid ?? ''}>
          {gpu.name ?? NA}
        </span>
        <span class={`badge health ${lost ? 'bad' : 'ok'}`} title={gpu.healthMessage ?? ''}>
          {lost ? gpu.health.toUpperCase() : 'ok'}
        </span>
      </header>
      {lost && gpu.healthMessage && <p class="health-message">{gpu.healthMessage}</p>}
      <div class="meter">
        <div class="meter-head">
          <span class="label">utilization</span>
          <span class="value util" title={tip('utilization') || undefined}>
            {fmtNum(gpu.utilizationPct, 0, ' %')}
          </span>
        </div>
        <Bar value={gpu.utilizationPct} label="utilization" />
      </div>
      <div class="meter">
        <div class="meter-head">
          <span class="label">memory</span>
          <span class="value mem" title={tip('memory.used', 'memory.total') || undefined}>
            {fmtMib(gpu.memoryUsedMib)} / {fmtMib(gpu.memoryTotalMib)}
          </span>
        </div>
        <Bar value={memPct} label="memory used" />
      </div>
      <div class="stats">
        <Stat
          label="temperature"
          value={fmtNum(gpu.temperatureC, 0, ' °C')}
          cls={gpu.temperatureC !== null && gpu.temperatureC >= 85 ? 'hot' : ''}
          title={tip('temperature')}
        />
        <Stat label="power" value={power} title={tip('power_usage', 'power_limit')} />
        <Stat label="fan" value={fmtNum(gpu.fanPct, 0, ' %')} title={tip('fan_speed')} />
        <Stat label="clocks (sm / mem)" value={clocks} title={tip('clock_speeds.graphics', 'clock_speeds.memory')} />
        <Stat label="perf state" value={gpu.performanceState ?? NA} title={tip('performance_state')} />
        <Stat label="availability" value={fmtNum(gpu.availabilityScore, 2)} title={tip('availability_score')} />
      </div>
    </article>
  );
}
