// What the browser tests share: counted checks, bounded waits, and the `N passed, N failed` line that
// CI reads. Plain node, no test runner.

export const results = { passed: 0, failed: 0 };

export function summary() {
  console.log(`${results.passed} passed, ${results.failed} failed`);
}

/** 0 when every check passed and there was at least one. */
export function exitCode() {
  return results.failed === 0 && results.passed > 0 ? 0 : 1;
}

/** A setup step that cannot go on: counts as a failure, ends the run. */
export class SetupError extends Error {}

export async function check(name, fn) {
  try {
    await fn();
    results.passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    results.failed++;
    console.log(`FAIL ${name}: ${e instanceof Error ? e.message : e}`);
  }
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns something truthy (returned), or throws after timeoutMs naming `what`. */
export async function until(what, fn, timeoutMs = 10_000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      if (e instanceof SetupError) throw e;
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? ` (${last.message})` : ''}`);
    await sleep(everyMs);
  }
}
