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

import { assert, check, exitCode, results, summary } from './harness.mjs';

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

try {
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
    for (let i = n + 5; i < n + 40; i++) s.put(i * step, 0, i);
    s.prune();
    assert(s.length === n, `after a chunk the window is exact again: ${s.length}`);
    // Newest row at n + 39 s: the window starts 900 s before it.
    const oldest = n + 39 - WINDOW_MS / step;
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
} catch (e) {
  results.failed++;
  console.log(`FAIL setup: ${e instanceof Error ? e.stack : e}`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
summary();
process.exit(exitCode());
