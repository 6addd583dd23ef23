// The uPlot lifecycle every chart of the dashboard shares: made in its box when its shape changes, as wide
// as the box (a ResizeObserver follows it: no layout reads per update), destroyed when the shape changes
// again or the chart goes. The data of an update goes in through the returned instance's setData.
import type { RefObject } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** The narrowest a chart is drawn, whatever its box. */
const MIN_WIDTH = 200;

/** The box's width for a chart. */
export const chartWidth = (el: HTMLElement) => Math.max(MIN_WIDTH, el.clientWidth);

/** A theme colour from the stylesheet's variables. */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/**
 * Makes a uPlot in `box` whenever `deps` change, with the options `opts(el)` gives (the width is the box's)
 * and the data `data()` gives; `made(u, el)` runs after each making. Returns the live instance (null
 * between charts).
 */
export function useUPlot(
  box: RefObject<HTMLElement | null>,
  opts: (el: HTMLElement) => Omit<uPlot.Options, 'width'>,
  data: () => uPlot.AlignedData,
  deps: unknown[],
  made?: (u: uPlot, el: HTMLElement) => void,
): RefObject<uPlot | null> {
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const o = opts(el);
    const u = new uPlot({ ...o, width: chartWidth(el) } as uPlot.Options, data(), el);
    plot.current = u;
    made?.(u, el);
    const ro = new ResizeObserver(() => u.setSize({ width: chartWidth(el), height: o.height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // The caller names what the chart's shape depends on; its data goes in through setData.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  return plot;
}
