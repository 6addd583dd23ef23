// One live uPlot chart: x = time over the last hour. Up to LINES_MAX_GPUS GPUs it draws one line per
// GPU. With more it draws the range across all GPUs as a band (min to max), their mean, and lines for a
// few GPUs: those picked on the cards, else the BAND_TOP with the highest recent values (re-chosen at
// most once a minute). 64 lines per chart cost most of a live update to draw and cannot be told apart
// anyway; every GPU's own history is on its page.
//
// The uPlot instance is created once per shape (line GPUs, or band) and colour scheme (useUPlot), then fed
// with setData; a change of the band's lines adds and removes series on the same instance.
import type { RefObject } from 'preact';
import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { fmtClock, gpuColor } from '../format';
import type { SeriesStore } from '../series';
import { cssVar, useUPlot } from '../useUPlot';

export interface ChartProps {
  id: string;
  title: string;
  unit: string;
  store: SeriesStore;
  /** Bumped whenever the store changes. */
  version: number;
  /** Every GPU with data, in order. */
  gpus: number[];
  /** GPUs picked for a line of their own when the chart draws a band (empty: the busiest). */
  picked: number[];
  /** Fixed y range (e.g. 0-100 for %); otherwise from the data, starting at 0. */
  yMax?: number;
  fmtValue: (v: number) => string;
  dark: boolean;
}

const HEIGHT = 180;
/** Above this many GPUs a chart draws a band with a few lines instead of a line per GPU. */
export const LINES_MAX_GPUS = 8;
/** Lines a band chart draws when none are picked. */
export const BAND_TOP = 3;
/** The most picked lines a band chart draws. */
const PICKED_MAX = 8;
/** How often a band chart may re-choose its busiest GPUs, and over how many of the newest rows. */
const RESELECT_MS = 60_000;
const RESELECT_ROWS = 300;
/** How long after its redraw was due a chart draws without waiting for another update. */
const FALLBACK_MS = 3000;
/** The longest a live update waits for its redraw (an hour over ~650 px is ~5.5 s per pixel; the cards
 *  above the charts show every update's values). */
const MAX_BATCH_MS = 5000;

function latest(col: ArrayLike<number | null | undefined>): number | null {
  for (let i = col.length - 1; i >= 0; i--) if (col[i] !== undefined) return col[i] ?? null;
  return null;
}

const sameList = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * When a live chart draws. A chart scrolled out of view is not redrawn: with many GPUs the redraw is most of
 * an update's cost. It catches up (one setData) when it comes back into view. In view, it is redrawn at most
 * once per pixel of time (the data's span over the plot's width: ~5.5 s for an hour on 650 px, capped at
 * 5 s), in the frame of the first update after that: a redraw sooner would move nothing on screen, and a
 * redraw in a frame of its own would cost a second frame. Updates in between are batched. `paint` puts the
 * store's data into the chart.
 */
function useRedraw(box: RefObject<HTMLDivElement | null>, plot: RefObject<uPlot | null>, store: SeriesStore, version: number, paint: (u: uPlot) => void) {
  const visible = useRef(true);
  const stale = useRef(false);
  const lastDraw = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const frame = useRef<number | null>(null);
  const paintRef = useRef(paint);
  paintRef.current = paint;
  const draw = (force = false) => {
    const u = plot.current;
    if (!u) return;
    if (!visible.current && !force) {
      stale.current = true;
      return;
    }
    stale.current = false;
    lastDraw.current = performance.now();
    paintRef.current(u);
    if (box.current) box.current.dataset.drawn = String(u.data[0].length);
  };
  const drawRef = useRef(draw);
  drawRef.current = draw;
  const drawSoon = () => {
    if (frame.current !== null) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = null;
      drawRef.current();
    });
  };

  useEffect(() => {
    const el = box.current;
    if (!el || typeof IntersectionObserver === 'undefined') return;
    const io = new IntersectionObserver((entries) => {
      visible.current = entries[entries.length - 1].isIntersecting;
      if (visible.current && stale.current) drawSoon();
    });
    io.observe(el);
    return () => {
      io.disconnect();
      if (timer.current) clearTimeout(timer.current);
      if (frame.current !== null) cancelAnimationFrame(frame.current);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // A layout effect: the redraw due with this update happens in the same task as the render (the app
  // renders live updates in an animation frame), so cards and charts are painted in one frame.
  useLayoutEffect(() => {
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
    if (wait <= 0) {
      if (frame.current !== null) cancelAnimationFrame(frame.current), (frame.current = null);
      if (timer.current !== null) clearTimeout(timer.current), (timer.current = null);
      draw();
    } else if (timer.current === null)
      // Normally a later update draws (in its own frame, with the cards); this is for when none comes.
      timer.current = setTimeout(() => {
        timer.current = null;
        drawSoon();
      }, wait + FALLBACK_MS);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version]);
  return { draw, drawSoon };
}

type LegendValue = (u: uPlot, v: number | null, sidx: number, idx: number | null) => string;

/** A live chart's options: x = time, its series (a line per GPU, or mean, min and max with a band). */
function chartOptions(
  band: boolean,
  gpuCount: number,
  lines: number[],
  yMax: number | undefined,
  legendValue: LegendValue,
  lineSeries: (g: number) => uPlot.Series,
  fmt: (v: number) => string,
): Omit<uPlot.Options, 'width'> {
  const axisStroke = cssVar('--muted');
  const grid = { stroke: cssVar('--grid'), width: 1 };
  const edge = cssVar('--band-edge');
  const xSeries: uPlot.Series = {
    label: 'time',
    value: (_u: uPlot, v: number | null, _s: number, idx: number | null) => (idx === null || v === null ? 'latest' : fmtClock(v * 1000)),
  };
  const series: uPlot.Series[] = band
    ? [
        xSeries,
        { label: `mean of ${gpuCount}`, stroke: cssVar('--text'), width: 1.5, points: { show: false }, value: legendValue },
        { label: 'min', stroke: edge, width: 1, points: { show: false }, value: legendValue },
        { label: 'max', stroke: edge, width: 1, points: { show: false }, value: legendValue },
      ]
    : [xSeries, ...lines.map(lineSeries)];
  return {
    height: HEIGHT,
    legend: { show: true, live: true },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true },
      y: yMax !== undefined ? { range: [0, yMax], auto: false } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [
      { stroke: axisStroke, grid, ticks: grid },
      { stroke: axisStroke, grid, ticks: grid, size: 64, values: (_u, vals) => vals.map((v) => fmt(v)) },
    ],
    series,
    bands: band ? [{ series: [3, 2], fill: cssVar('--band-fill') }] : undefined,
  };
}

export function Chart({ id, title, unit, store, version, gpus, picked, yMax, fmtValue, dark }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const band = gpus.length > LINES_MAX_GPUS;
  // Line mode: the GPUs drawn. Band mode: the GPUs with a line of their own (series 4, 5, …).
  const lines = useRef<number[]>([]);
  const chosenAt = useRef(0);
  const shapeKey = band ? 'band' : gpus.join(',');
  const gpusRef = useRef(gpus);
  gpusRef.current = gpus;
  const pickedRef = useRef(picked);
  pickedRef.current = picked;
  const fmtRef = useRef(fmtValue);
  fmtRef.current = fmtValue;

  // Under the cursor: that sample; elsewhere: the latest, so the legend reads as "now".
  const legendValue: LegendValue = (u, v, sidx, idx) => {
    if (idx === null) v = latest(u.data[sidx]);
    return v === null || v === undefined ? 'n/a' : fmtRef.current(v);
  };
  const lineSeries = (g: number): uPlot.Series => ({ label: `GPU ${g}`, stroke: gpuColor(g), width: 1, points: { show: false }, value: legendValue });

  // The chart is made again only when its shape changes; the store's data goes in through draw().
  const plot = useUPlot(
    box,
    () => {
      lines.current = band ? [] : [...gpusRef.current];
      chosenAt.current = 0;
      return chartOptions(band, gpusRef.current.length, lines.current, yMax, legendValue, lineSeries, (v) => fmtRef.current(v));
    },
    // Empty columns, one per series: draw() below fills them.
    () => [[], ...(band ? [[], [], []] : lines.current.map(() => []))] as unknown as uPlot.AlignedData,
    [shapeKey, dark, yMax],
    (_u, el) => {
      el.dataset.mode = band ? 'band' : 'lines';
      el.dataset.lines = lines.current.join(',');
      draw(true);
    },
  );

  /** The lines a band chart should draw now. */
  const wantedLines = (now: number): number[] => {
    const p = pickedRef.current.filter((g) => gpusRef.current.includes(g)).slice(0, PICKED_MAX);
    if (p.length) {
      chosenAt.current = 0; // when the pick is cleared, choose the busiest at once
      return p;
    }
    if (chosenAt.current && now - chosenAt.current < RESELECT_MS) return lines.current;
    // Chosen from no data (the first update), the choice is made again at the next redraw.
    chosenAt.current = store.length > 1 ? now : 0;
    return store.top(BAND_TOP, RESELECT_ROWS).sort((a, b) => a - b);
  };

  // About a row per pixel (each bucket of two pixels gives its min and its max, so spikes stay).
  const paint = (u: uPlot) => {
    const maxRows = Math.max(200, Math.round(u.bbox.width / (uPlot.pxRatio || 1)));
    if (!band) {
      u.setData(store.toAlignedThin(lines.current, maxRows));
      return;
    }
    const want = wantedLines(Date.now());
    u.batch(() => {
      if (!sameList(want, lines.current)) {
        for (let i = u.series.length - 1; i >= 4; i--) u.delSeries(i);
        for (const g of want) u.addSeries(lineSeries(g));
        lines.current = want;
        if (box.current) box.current.dataset.lines = want.join(',');
      }
      u.setData(store.toAlignedBand(lines.current, maxRows));
    });
  };
  const { draw, drawSoon } = useRedraw(box, plot, store, version, paint);

  // A new pick is drawn at once.
  const pickedKey = picked.join(',');
  useEffect(() => {
    if (band) drawSoon();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [pickedKey]);

  return (
    <figure class="chart">
      <figcaption>
        {title} <span class="unit">{unit}</span>
        {band && <span class="muted chart-note"> · band: min–max of {gpus.length} GPUs</span>}
      </figcaption>
      <div class="chart-plot" id={id} ref={box} data-points="0" />
    </figure>
  );
}
