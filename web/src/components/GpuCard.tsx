import { Component } from 'preact';
import type { FieldsDoc, Gpu } from '../api';
import { fmtInt, fmtNum, gpuColor, NA, pct } from '../format';
import { href } from '../router';
import { MigInstances } from './MigInstances';

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
  /** With band charts (many GPUs): whether this GPU is picked for a line of its own; null: no control. */
  charted?: boolean | null;
  onChartToggle?: (index: number) => void;
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
    this.io = new IntersectionObserver((entries) => this.setState({ near: entries[entries.length - 1].isIntersecting }), { rootMargin: '0px' });
    this.io.observe(el);
  };

  shouldComponentUpdate(_next: CardProps, next: { near: boolean }): boolean {
    return next.near;
  }

  componentWillUnmount() {
    this.io?.disconnect();
  }

  render() {
    return <GpuCardBody {...this.props} cardRef={this.observe} />;
  }
}

/** A field's label and unit from the agent's table; until it has arrived, the key and no unit. */
function meta(doc: FieldsDoc | null, key: string): { label: string; unit: string } {
  const f = doc?.fields.find((x) => x.key === key);
  return { label: f?.label ?? key, unit: f?.unit ?? '' };
}

/** " %", " °C": a unit after a number ("" for none). */
const sp = (unit: string) => (unit ? ` ${unit}` : '');

function GpuCardBody({ gpu, fields, charted, onChartToggle, cardRef }: CardProps & { cardRef: (el: Element | null) => void }) {
  const lost = gpu.health !== 'ok';
  const tip = (...keys: string[]) => why(gpu, fields, keys);
  const m = (key: string) => meta(fields, key);
  const util = m('utilization');
  const memUsed = m('memory.used');
  const memTotal = m('memory.total');
  const temp = m('temperature');
  const power = m('power_usage');
  const fan = m('fan_speed');
  const sm = m('clock_speeds.graphics');
  const memClock = m('clock_speeds.memory');
  const pstate = m('performance_state');
  const avail = m('availability_score');
  const memPct = pct(gpu.memoryUsedMib, gpu.memoryTotalMib);
  const powerText =
    gpu.powerW === null && gpu.powerLimitW === null ? NA : `${fmtNum(gpu.powerW, 0)} / ${fmtNum(gpu.powerLimitW, 0)}${sp(power.unit)}`;
  const clocks =
    gpu.graphicsClockMhz === null && gpu.memoryClockMhz === null
      ? NA
      : `${fmtNum(gpu.graphicsClockMhz)} / ${fmtNum(gpu.memoryClockMhz)}${sp(sm.unit)}`;
  const amount = (v: number | null, unit: string) => (v === null ? NA : `${fmtInt(v)}${sp(unit)}`);
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
        {charted !== null && charted !== undefined && onChartToggle && (
          <button
            type="button"
            class="pick-line"
            aria-pressed={charted}
            title={charted ? `GPU ${gpu.index} has a line of its own in the charts: click to drop it` : `draw GPU ${gpu.index} as a line of its own in the charts`}
            onClick={() => onChartToggle(gpu.index)}
          >
            {charted ? '◉' : '○'}
          </button>
        )}
        <span class={`badge health ${lost ? 'bad' : 'ok'}`} title={gpu.healthMessage ?? ''}>
          {lost ? gpu.health.toUpperCase() : 'ok'}
        </span>
      </header>
      {lost && gpu.healthMessage && <p class="health-message">{gpu.healthMessage}</p>}
      <div class="meter">
        <div class="meter-head">
          <span class="label">{util.label}</span>
          <span class="value util" title={tip('utilization') || undefined}>
            {fmtNum(gpu.utilizationPct, 0, sp(util.unit))}
          </span>
        </div>
        <Bar value={gpu.utilizationPct} label={util.label} />
      </div>
      <div class="meter">
        <div class="meter-head">
          <span class="label">{memUsed.label}</span>
          <span class="value mem" title={tip('memory.used', 'memory.total') || undefined}>
            {amount(gpu.memoryUsedMib, memUsed.unit)} / {amount(gpu.memoryTotalMib, memTotal.unit)}
          </span>
        </div>
        <Bar value={memPct} label={memUsed.label} />
      </div>
      <div class="stats">
        <Stat
          label={temp.label}
          value={fmtNum(gpu.temperatureC, 0, sp(temp.unit))}
          cls={gpu.temperatureC !== null && gpu.temperatureC >= 85 ? 'hot' : ''}
          title={tip('temperature')}
        />
        <Stat label={power.label} value={powerText} title={tip('power_usage', 'power_limit')} />
        <Stat label={fan.label} value={fmtNum(gpu.fanPct, 0, sp(fan.unit))} title={tip('fan_speed')} />
        <Stat label={`${sm.label} / ${memClock.label}`} value={clocks} title={tip('clock_speeds.graphics', 'clock_speeds.memory')} />
        <Stat label={pstate.label} value={gpu.performanceState ?? NA} title={tip('performance_state')} />
        <Stat label={avail.label} value={fmtNum(gpu.availabilityScore, 2)} title={tip('availability_score')} />
      </div>
      <MigInstances gpu={gpu} />
    </article>
  );
}
