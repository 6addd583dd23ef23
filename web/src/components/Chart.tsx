// One uPlot line chart: x = time, one series per GPU. The chart is created once per GPU set and
// colour scheme, then fed with setData; its width follows the container.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { gpuColor } from '../format';
import type { SeriesStore } from '../series';

export interface ChartProps {
  id: string;
  title: string;
  unit: string;
  store: SeriesStore;
  /** Bumped whenever the store changes. */
  version: number;
  /** GPU indices to draw, in order. */
  gpus: number[];
  /** Fixed y range (e.g. 0-100 for %); otherwise from the data, starting at 0. */
  yMax?: number;
  fmtValue: (v: number) => string;
  dark: boolean;
}

const HEIGHT = 180;
/** The longest a live update waits for its redraw. */
const MAX_BATCH_MS = 2000;
const LIVE_LEGEND_MAX_GPUS = 16;

function latest(col: ArrayLike<number | null | undefined>): number | null {
  for (let i = col.length - 1; i >= 0; i--) if (col[i] !== undefined) return col[i] ?? null;
  return null;
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

export function Chart({ id, title, unit, store, version, gpus, yMax, fmtValue, dark }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const gpuKey = gpus.join(',');

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const axisStroke = cssVar('--muted');
    const grid = { stroke: cssVar('--grid'), width: 1 };
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      // With many GPUs a legend that follows every update rewrites a cell per GPU per chart each time.
      legend: { show: true, live: gpus.length <= LIVE_LEGEND_MAX_GPUS },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: yMax !== undefined ? { range: [0, yMax], auto: false } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        { stroke: axisStroke, grid, ticks: grid },
        { stroke: axisStroke, grid, ticks: grid, size: 64, values: (_u, vals) => vals.map((v) => fmtValue(v)) },
      ],
      series: [
        {
          label: 'time',
          value: (_u: uPlot, v: number | null, _s: number, idx: number | null) =>
            idx === null || v === null ? 'latest' : new Date(v * 1000).toLocaleTimeString([], { hour12: false }),
        },
        ...gpus.map((g) => ({
          label: `GPU ${g}`,
          stroke: gpuColor(g),
          width: 1,
          points: { show: false },
          // Under the cursor: that sample; elsewhere: the latest sample, so the legend reads as "now".
          value: (u: uPlot, v: number | null, sidx: number, idx: number | null) => {
            if (idx === null) v = latest(u.data[sidx]);
            return v === null || v === undefined ? 'n/a' : fmtValue(v);
          },
        })),
      ],
    };
    const u = new uPlot(opts, store.toAligned(gpus), el);
    plot.current = u;
    el.dataset.points = String(store.length);
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: HEIGHT }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // The store's data goes in through setData below; the chart is rebuilt only when its shape changes.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [gpuKey, dark, yMax]);

  // A chart scrolled out of view is not redrawn: with many GPUs the redraw is most of an update's cost.
  // It catches up (one setData) when it comes back into view. In view, it is redrawn at most once per
  // pixel of time (the data's span over the plot's width, ~1.4 s for 15 minutes on 650 px): a redraw
  // sooner would move nothing on screen. Updates in between are batched into the next redraw.
  const visible = useRef(true);
  const stale = useRef(false);
  const lastDraw = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const redraw = () => {
    const u = plot.current;
    if (!u) return;
    if (!visible.current) {
      stale.current = true;
      return;
    }
    stale.current = false;
    lastDraw.current = performance.now();
    u.setData(store.toAlignedThin(gpus, Math.max(200, Math.round((2 * u.bbox.width) / (uPlot.pxRatio || 1)))));
  };
  const redrawRef = useRef(redraw);
  redrawRef.current = redraw;
  useEffect(() => {
    const el = box.current;
    if (!el || typeof IntersectionObserver === 'undefined') return;
    const io = new IntersectionObserver((entries) => {
      visible.current = entries[entries.length - 1].isIntersecting;
      if (visible.current && stale.current) redrawRef.current();
    });
    io.observe(el);
    return () => {
      io.disconnect();
      if (timer.current) clearTimeout(timer.current);
    };
  }, []);

  useEffect(() => {
    if (box.current) box.current.dataset.points = String(store.length);
    const u = plot.current;
    if (!u) return;
    if (!visible.current) {
      stale.current = true;
      return;
    }
    const widthPx = u.bbox.width / (uPlot.pxRatio || 1);
    const pixelMs = widthPx > 0 ? Math.min(MAX_BATCH_MS, store.spanMs / widthPx) : 0;
    const wait = lastDraw.current + pixelMs - performance.now();
    if (wait <= 0) redraw();
    else if (timer.current === null)
      timer.current = setTimeout(() => {
        timer.current = null;
        redrawRef.current();
      }, wait);
  }, [version]);

  return (
    <figure class="chart">
      <figcaption>
        {title} <span class="unit">{unit}</span>
      </figcaption>
      <div class="chart-plot" id={id} ref={box} data-points="0" />
    </figure>
  );
}
