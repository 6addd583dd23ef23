#!/usr/bin/env node
// The dashboard's pure modules without a browser: the per-GPU page's time ranges (web/src/ranges.ts), the
// live charts' series store (web/src/series.ts), and the stylesheet's structure. Each file is transpiled
// with the TypeScript compiler the build already uses (no type check: `npm run build` does that) into a
// temp dir and imported.
//
//   node web/tests/units.test.mjs
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { assert, check, suite } from './harness.mjs';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tmp = mkdtempSync(join(tmpdir(), 'gf-web-units-'));

async function load(name) {
  const ts = createRequire(join(webDir, 'package.json'))('typescript');
  const src = readFileSync(join(webDir, 'src', `${name}.ts`), 'utf8');
  const out = ts.transpileModule(src, { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } });
  const file = join(tmp, `${name}.mjs`);
  writeFileSync(file, out.outputText);
  return import(pathToFileURL(file).href);
}

async function main() {
  const r = await load('ranges');
  const { SeriesStore, WINDOW_MS } = await load('series');

  await check('stepFor: each preset gets the step the page documents, and never more than 400 points', async () => {
    const want = { '5m': 1, '1h': 10, '6h': 60, '24h': 300, '7d': 1800, '30d': 7200 };
    for (const p of r.PRESETS) {
      const s = r.stepFor(p.spanS);
      assert(s === want[p.key], `${p.key}: step ${s}, want ${want[p.key]}`);
      assert(p.spanS / s <= 400, `${p.key}: ${p.spanS / s} points`);
    }
    assert(r.stepFor(1) === 1, 'one second');
    const year = r.stepFor(3 * 365 * 86400);
    assert(year % 86400 === 0 && (3 * 365 * 86400) / year <= 400, `three years: step ${year}`);
  });

  await check('parseRange: presets, from–to, and bad input falling back to 1 h', async () => {
    const q = (s) => r.parseRange(new URLSearchParams(s));
    assert(q('range=6h').kind === 'preset' && q('range=6h').spanS === 21600, 'range=6h');
    const c = q('from=1000&to=2000.5');
    assert(c.kind === 'custom' && c.fromS === 1000 && c.toS === 2001, `custom ${JSON.stringify(c)}`);
    for (const bad of ['', 'range=2y', 'from=2000&to=1000', 'from=x&to=5', 'from=-5&to=5', 'from=10'])
      assert(q(bad).kind === 'preset' && q(bad).key === '1h', `"${bad}" gave ${JSON.stringify(q(bad))}`);
    assert(q('range=5m&from=1&to=2').kind === 'custom', 'from–to wins over a preset');
  });

  await check('bounds and the datetime-local round trip', async () => {
    const [a, b] = r.bounds({ kind: 'preset', key: '1h', spanS: 3600 }, 10_000_500);
    assert(a === 10_000 - 3600 && b === 10_000, `preset bounds ${a}..${b}`);
    const t = Math.floor(Date.UTC(2026, 10, 25, 7, 30) / 1000);
    assert(r.fromLocalInput(r.toLocalInput(t)) === t, 'a whole minute survives the round trip');
    assert(r.fromLocalInput('not a date') === null, 'garbage is null');
    assert(r.showsBand(1) === false && r.showsBand(10) === true, 'band only above 1 s');
  });
  const shared = { SeriesStore, WINDOW_MS };
  await storeChecks(shared);
  await bandChecks(shared);
  await styleChecks();
}

/** The live charts' series store: order, alignment, the window and thinning. */
async function storeChecks({ SeriesStore, WINDOW_MS }) {
  await check('SeriesStore: out-of-order puts land in time order; columns stay aligned; a new GPU gets gaps', async () => {
    const s = new SeriesStore();
    s.put(3000, 0, 3);
    s.put(1000, 0, 1);
    s.put(2000, 1, 20);
    s.put(2000, 0, 2);
    const [xs, g0, g1] = s.toAligned([0, 1]);
    assert(JSON.stringify(xs) === '[1,2,3]', `xs ${JSON.stringify(xs)}`);
    assert(JSON.stringify(g0) === '[1,2,3]', `gpu 0 ${JSON.stringify(g0)}`);
    assert(g1.length === 3 && g1[0] === undefined && g1[1] === 20 && g1[2] === undefined, `gpu 1 ${JSON.stringify(g1)}`);
    assert(JSON.stringify(s.toAligned([5])[1]) === '[null,null,null]', 'a GPU without data: all undefined');
    s.put(2000, 1, null);
    assert(s.toAligned([1])[1][1] === null, 'null (no reading) is kept apart from undefined (no sample)');
  });

  await check('the live window is an hour', async () => {
    assert(WINDOW_MS === 3_600_000, `WINDOW_MS ${WINDOW_MS}`);
  });

  await check('SeriesStore.prune: keeps the window, cuts in chunks of 1/64 of it', async () => {
    const s = new SeriesStore();
    const step = 1000;
    const n = WINDOW_MS / step + 1;
    for (let i = 0; i < n; i++) s.put(i * step, 0, i);
    s.prune();
    assert(s.length === n, `nothing is older than the window: ${s.length} of ${n}`);
    for (let i = n; i < n + 5; i++) s.put(i * step, 0, i);
    s.prune();
    assert(s.length === n + 5, `5 overdue rows wait for a chunk: ${s.length}`);
    const last = n + 5 + Math.ceil(n / 64) + 5;
    for (let i = n + 5; i <= last; i++) s.put(i * step, 0, i);
    s.prune();
    assert(s.length === n, `after a chunk the window is exact again: ${s.length}`);
    // The window (an hour) starts WINDOW_MS before the newest row.
    const oldest = last - WINDOW_MS / step;
    assert(s.toAligned([0])[0][0] === oldest, `oldest row ${s.toAligned([0])[0][0]} s, want ${oldest} s`);
  });

  await check('SeriesStore.toAlignedThin: at most ~maxRows, spikes and the newest row kept, order preserved', async () => {
    const s = new SeriesStore();
    for (let i = 0; i < 1000; i++) {
      s.put(1e6 + i * 250, 0, i === 500 ? 99 : i === 501 ? -5 : i % 10);
      if (i % 3) s.put(1e6 + i * 250, 1, 5);
    }
    const full = s.toAligned([0, 1]);
    const thin = s.toAlignedThin([0, 1], 100);
    assert(thin[0].length <= 101, `${thin[0].length} rows`);
    const nums = (c) => c.filter((v) => typeof v === 'number');
    assert(Math.max(...nums(thin[1])) === 99 && Math.min(...nums(thin[1])) === -5, 'the spike and the dip survive');
    const i99 = thin[1].indexOf(99);
    assert(thin[1].indexOf(-5) === i99 + 1, 'max then min, in the order they happened');
    assert(thin[0].every((x, i, a) => i === 0 || a[i - 1] <= x), 'times ascend');
    assert(thin[0][0] === full[0][0] && thin[0].at(-1) === full[0].at(-1), 'first and last times kept');
    assert(thin[1].at(-1) === full[1].at(-1) && thin[2].at(-1) === full[2].at(-1), 'the newest row is the raw one');
    assert(s.toAlignedThin([0], 5000)[0] === full[0], 'no thinning when the rows fit');
  });
}

/** The series store's band columns and its busiest GPUs. */
async function bandChecks({ SeriesStore, WINDOW_MS }) {
  await check('SeriesStore.toAlignedBand: min, mean and max across GPUs per row, then the picked lines', async () => {
    const s = new SeriesStore();
    s.put(1000, 0, 10);
    s.put(1000, 1, 30);
    s.put(1000, 2, null); // no reading: not part of the range
    s.put(2000, 0, 50);
    s.put(2000, 1, 70);
    s.put(2000, 2, 90);
    s.put(3000, 2, null);
    const [xs, mean, min, max, l1] = s.toAlignedBand([1], 100);
    assert(JSON.stringify(xs) === '[1,2,3]', `xs ${JSON.stringify(xs)}`);
    assert(JSON.stringify(mean) === '[20,70,null]', `mean ${JSON.stringify(mean)}`);
    assert(JSON.stringify(min) === '[10,50,null]' && JSON.stringify(max) === '[30,90,null]', `min ${JSON.stringify(min)} max ${JSON.stringify(max)}`);
    assert(l1[0] === 30 && l1[1] === 70 && l1[2] === undefined, `line of GPU 1 ${JSON.stringify(l1)}`);
    // A later put changes the aggregates of its row only; an inserted row shifts them with the data.
    s.put(2000, 0, 0);
    s.put(1500, 1, 5);
    const [xs2, mean2, min2, max2] = s.toAlignedBand([], 100);
    assert(JSON.stringify(xs2) === '[1,1.5,2,3]', `xs ${JSON.stringify(xs2)}`);
    assert(JSON.stringify(min2) === '[10,5,0,null]' && JSON.stringify(max2) === '[30,5,90,null]', `min ${JSON.stringify(min2)} max ${JSON.stringify(max2)}`);
    assert(Math.abs(mean2[2] - 160 / 3) < 1e-9 && mean2[1] === 5, `mean ${JSON.stringify(mean2)}`);
  });

  await check('SeriesStore.toAlignedBand: thinned, the band keeps each bucket\'s extremes; prune keeps it aligned', async () => {
    const s = new SeriesStore();
    const n = WINDOW_MS / 1000 + 200;
    for (let i = 0; i < n; i++) for (let g = 0; g < 16; g++) s.put(i * 1000, g, i === 1900 && g === 5 ? 100 : i === 2500 && g === 9 ? -1 : (g + i) % 20);
    s.toAlignedBand([], 100); // aggregates computed once, then pruned with the rows
    s.prune();
    const full = s.toAlignedBand([5], 100000);
    const [xs, mean, min, max, l5] = s.toAlignedBand([5], 400);
    assert(xs.length <= 401, `${xs.length} rows`);
    assert(Math.max(...max) === 100 && Math.min(...min) === -1, `band ${Math.min(...min)}..${Math.max(...max)}`);
    assert(Math.max(...l5) === 100, 'the picked line keeps its spike');
    // Every bucket's lower edge is the min of all GPUs in it: never above the mean, the mean never above max.
    assert(xs.every((_, i) => min[i] <= mean[i] && mean[i] <= max[i]), 'min <= mean <= max');
    // The aggregates after a prune equal ones computed from scratch.
    const fresh = new SeriesStore();
    const [fx, , fmin, fmax] = full;
    for (let i = 0; i < fx.length; i++) for (let g = 0; g < 16; g++) fresh.put(fx[i] * 1000, g, s.toAligned([g])[1][i]);
    const again = fresh.toAlignedBand([], 100000);
    assert(JSON.stringify(again[2]) === JSON.stringify(fmin) && JSON.stringify(again[3]) === JSON.stringify(fmax), 'pruned aggregates drifted from the data');
  });

  await check('SeriesStore.top: the GPUs with the highest recent mean, ties to the lower index', async () => {
    const s = new SeriesStore();
    for (let i = 0; i < 100; i++) {
      s.put(i * 1000, 0, 10);
      s.put(i * 1000, 1, i < 50 ? 99 : 0); // busy long ago, idle lately
      s.put(i * 1000, 2, 50);
      s.put(i * 1000, 3, 50);
      s.put(i * 1000, 4, 80);
      if (i % 2) s.put(i * 1000, 5, null);
    }
    assert(JSON.stringify(s.top(3, 30)) === '[4,2,3]', `top ${JSON.stringify(s.top(3, 30))}`);
    assert(s.top(1, 100)[0] === 4 && s.top(2, 100)[1] === 2, `over 100 rows ${JSON.stringify(s.top(3, 100))}`);
    assert(s.top(10, 30).at(-1) === 5, 'a GPU without values comes last');
  });
}

/** The stylesheet's structure. */
async function styleChecks() {
  await check('styles.css: every rule is closed (no rule nested in another by a missing brace)', async () => {
    // A rule left open once swallowed the rest of the sheet as nested rules: the cards' content-visibility,
    // the focus ring and the narrow-screen rules silently stopped applying.
    const css = readFileSync(join(webDir, 'src', 'styles.css'), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
    const stack = [];
    let line = 1;
    let head = '';
    for (const ch of css) {
      if (ch === '\n') line++;
      if (ch === '{') {
        const sel = head.trim();
        const parent = stack.at(-1);
        assert(parent === undefined || parent.startsWith('@'), `line ${line}: "${sel}" opens inside "${parent}"`);
        stack.push(sel);
        head = '';
      } else if (ch === '}') {
        assert(stack.length > 0, `line ${line}: a } closes nothing`);
        stack.pop();
        head = '';
      } else if (ch === ';') head = '';
      else head += ch;
    }
    assert(stack.length === 0, `unclosed: ${stack.join(' > ')}`);
  });
}

suite('units', { timeoutMs: 50_000, cleanup: () => rmSync(tmp, { recursive: true, force: true }) }, main);
