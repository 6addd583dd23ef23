// One metric of one GPU over a chosen time range: the bucket average as a line and, at coarse steps, the
// min–max of each bucket as a band around it. Alert episodes are shaded on the plot and marked (with a
// title) on a strip under it. Dragging across the plot picks a narrower range (onZoom); the chart itself
// does not zoom, the URL does, so the zoom has a link and back undoes it.
import type { RefObject } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import type { Alert } from '../api';
import { episodeTitle, type BandPoint } from '../gpuApi';
import { cssVar, useUPlot } from '../useUPlot';

export interface HistoryChartProps {
  id: string;
  title: string;
  unit: string;
  points: BandPoint[];
  /** Value scale into the chart's unit (MiB → GiB: 1/1024). */
  scale: number;
  /** The x range shown, epoch seconds. */
  from: number;
  to: number;
  band: boolean;
  yMax?: number;
  episodes: Alert[];
  fmtValue: (v: number) => string;
  dark: boolean;
  onZoom: (fromS: number, toS: number) => void;
}

const HEIGHT = 200;

/** `#rrggbb` with an alpha, for canvas fills (a theme colour comes from a CSS variable). */
function withAlpha(color: string, a: number): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color);
  return m ? `rgba(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)}, ${a})` : color;
}

/** x, then max and min (only with a band), then the average. */
function columns(points: BandPoint[], scale: number, band: boolean): uPlot.AlignedData {
  const n = points.length;
  const xs = new Array<number>(n);
  const avg = new Array<number | null>(n);
  const min = new Array<number | null>(n);
  const max = new Array<number | null>(n);
  for (let i = 0; i < n; i++) {
    const p = points[i];
    xs[i] = p.t / 1000;
    avg[i] = p.avg === null ? null : p.avg * scale;
    min[i] = p.min === null ? null : p.min * scale;
    max[i] = p.max === null ? null : p.max * scale;
  }
  return (band ? [xs, max, min, avg] : [xs, avg]) as uPlot.AlignedData;
}

/** The chart's options: the line (and band), the alert episodes shaded under them, drag to zoom. The hooks
 *  read the latest props through `live`. */
function historyOptions(
  live: RefObject<HistoryChartProps>,
  band: boolean,
  yMax: number | undefined,
  fmtValue: (v: number) => string,
  readArea: (u: uPlot) => void,
): Omit<uPlot.Options, 'width'> {
  const axisStroke = cssVar('--muted');
  const grid = { stroke: cssVar('--grid'), width: 1 };
  const line = cssVar('--accent');
  const bad = cssVar('--bad');
  return {
    height: HEIGHT,
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false, setScale: false } },
    select: { show: true, left: 0, top: 0, width: 0, height: 0 },
    scales: {
      x: { time: true, range: () => [live.current.from, live.current.to] },
      y: yMax !== undefined ? { range: [0, yMax] } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [
      { stroke: axisStroke, grid, ticks: grid },
      {
        stroke: axisStroke,
        grid,
        ticks: grid,
        values: (_u, vals) => vals.map((v) => fmtValue(v)),
        // Wide enough for the longest label ("1980 MHz"), at up to 9 px a character of the axis font.
        size: (_u, vals) => Math.max(48, 20 + 9 * Math.max(0, ...(vals ?? []).map((v) => String(v).length))),
      },
    ],
    series: [
      {
        label: 'time',
        value: (_u: uPlot, v: number | null) => (v === null ? '—' : new Date(v * 1000).toLocaleString([], { hour12: false })),
      },
      ...(band
        ? [
            { label: 'max', stroke: 'transparent', width: 0, points: { show: false }, value: (_u: uPlot, v: number | null) => (v === null ? '—' : fmtValue(v)) },
            { label: 'min', stroke: 'transparent', width: 0, points: { show: false }, value: (_u: uPlot, v: number | null) => (v === null ? '—' : fmtValue(v)) },
          ]
        : []),
      { label: band ? 'avg' : 'value', stroke: line, width: 1.5, points: { show: false }, value: (_u, v) => (v === null ? '—' : fmtValue(v)) },
    ],
    bands: band ? [{ series: [1, 2], fill: withAlpha(line, 0.22) }] : [],
    hooks: {
      // Alert episodes under the series: a shaded span from start to resolve (or to the right edge).
      drawClear: [
        (u) => {
          const eps = live.current.episodes;
          if (!eps.length) return;
          const { ctx, bbox } = u;
          ctx.save();
          ctx.fillStyle = withAlpha(bad, 0.16);
          for (const a of eps) {
            const x0 = Math.max(bbox.left, u.valToPos((a.startedAt ?? 0) / 1000, 'x', true));
            const end = a.resolvedAt === null ? live.current.to : a.resolvedAt / 1000;
            const x1 = Math.min(bbox.left + bbox.width, u.valToPos(end, 'x', true));
            if (x1 >= x0) ctx.fillRect(x0, bbox.top, Math.max(2, x1 - x0), bbox.height);
          }
          ctx.restore();
        },
      ],
      setSelect: [
        (u) => {
          const { left, width } = u.select;
          if (width < 3) return;
          const a = u.posToVal(left, 'x');
          const b = u.posToVal(left + width, 'x');
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          if (b - a >= 1) live.current.onZoom(Math.floor(a), Math.ceil(b));
        },
      ],
      setSize: [readArea],
    },
  };
}

export function HistoryChart(props: HistoryChartProps) {
  const { id, title, unit, points, scale, from, to, band, yMax, episodes, fmtValue, dark } = props;
  const box = useRef<HTMLDivElement>(null);
  // The hooks below are set up once per chart; they read the latest props through this ref.
  const live = useRef(props);
  live.current = props;
  // Where the plotting area sits in the box, in CSS px: the episode strip is laid out under it.
  const [area, setArea] = useState<{ left: number; width: number } | null>(null);

  const readArea = (u: uPlot) => {
    const r = uPlot.pxRatio || 1;
    setArea({ left: u.bbox.left / r, width: u.bbox.width / r });
  };

  const plot = useUPlot(
    box,
    () => historyOptions(live, band, yMax, fmtValue, readArea),
    () => columns(live.current.points, live.current.scale, band),
    [dark, band, yMax],
    (u, el) => {
      readArea(u);
      el.dataset.points = String(live.current.points.length);
    },
  );

  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    u.setData(columns(points, scale, band));
    if (box.current) box.current.dataset.points = String(points.length);
  }, [points, scale, from, to, episodes, band]);

  const span = to - from;
  return (
    <figure class="chart history-chart">
      <figcaption>
        {title} <span class="unit">{unit}</span>
        {band && <span class="muted band-note"> · line: average, band: min–max per bucket</span>}
      </figcaption>
      <div class="chart-plot" id={id} ref={box} data-points="0" data-band={band ? '1' : '0'} />
      {area && span > 0 && (
        <div class="episode-strip" style={{ marginLeft: `${area.left}px`, width: `${area.width}px` }} aria-hidden="true">
          {episodes.map((a) => {
            const s = Math.max(from, (a.startedAt ?? 0) / 1000);
            const e = Math.min(to, a.resolvedAt === null ? to : a.resolvedAt / 1000);
            if (e < s) return null;
            return (
              <span
                key={a.key}
                class={`episode sev-${a.severity ?? 'unknown'}`}
                title={episodeTitle(a)}
                style={{ left: `${((s - from) / span) * 100}%`, width: `max(3px, ${((e - s) / span) * 100}%)` }}
              />
            );
          })}
        </div>
      )}
    </figure>
  );
}
