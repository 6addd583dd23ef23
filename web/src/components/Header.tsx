import type { LinkState, Snapshot } from '../api';
import { NA } from '../format';

export const PERIODS_MS = [500, 1000, 2000, 5000];

export interface HeaderProps {
  snap: Snapshot | null;
  link: LinkState;
  retryInMs: number | null;
  alertsFiring: number;
  health: string | null;
  periodMs: number;
  onPeriod: (ms: number) => void;
}

const linkLabel: Record<LinkState, string> = { connecting: 'connecting', live: 'live', reconnecting: 'reconnecting' };

export function Header({ snap, link, retryInMs, alertsFiring, health, periodMs, onPeriod }: HeaderProps) {
  return (
    <header class="top">
      <div class="brand">
        <span class="logo">gpufleet</span>
        <span class="node" id="node-name" title="node">
          {snap?.node ?? NA}
        </span>
        {snap?.simulated && (
          <span class="badge simulated" id="simulated-badge" title="These GPUs come from a scenario, not from hardware">
            SIMULATED
          </span>
        )}
      </div>
      <dl class="facts">
        <div>
          <dt>backend</dt>
          <dd id="backend">{snap?.backend ?? NA}</dd>
        </div>
        <div>
          <dt>driver</dt>
          <dd id="driver">
            {snap?.driverVersion ?? NA}
            {snap?.cudaDriverVersion ? ` · CUDA ${snap.cudaDriverVersion}` : ''}
          </dd>
        </div>
        {health && health !== 'ok' && (
          <div>
            <dt>agent</dt>
            <dd class="warn">{health}</dd>
          </div>
        )}
      </dl>
      <div class="controls">
        <a
          href="#alerts"
          class={`badge alerts-count ${alertsFiring > 0 ? 'firing' : 'quiet'}`}
          id="alerts-firing"
          title="alerts firing"
        >
          {alertsFiring} {alertsFiring === 1 ? 'alert' : 'alerts'} firing
        </a>
        <label class="period">
          update every{' '}
          <select id="period" value={String(periodMs)} onChange={(e) => onPeriod(Number((e.target as HTMLSelectElement).value))}>
            {(PERIODS_MS.includes(periodMs) ? PERIODS_MS : [...PERIODS_MS, periodMs].sort((a, b) => a - b)).map((ms) => (
              <option value={String(ms)}>{ms / 1000} s</option>
            ))}
          </select>
        </label>
        <span
          class={`link ${link}`}
          id="link-state"
          data-state={link}
          title={link === 'reconnecting' && retryInMs !== null ? `retrying in ${(retryInMs / 1000).toFixed(1)} s` : ''}
        >
          <span class="dot" aria-hidden="true" />
          {linkLabel[link]}
        </span>
      </div>
    </header>
  );
}
