// What the browser tests share, on Node's built-in test runner (node:test): each file is one test whose
// timeout, report (TAP) and exit status come from node:test; each check is a subtest of it, so a failed
// check is reported and the next one runs; bounded waits. The processes a file starts are stopped by its
// cleanup, which runs however the test ends (a failure, the timeout, or a signal).
import test from 'node:test';

let context = null;

/**
 * Runs `main` as this file's test, within `timeoutMs`, then `cleanup`. When `main` throws (a setup step
 * that cannot go on), `onFailure` may print what explains it (the agents' output) before it is reported.
 */
export function suite(name, { timeoutMs, cleanup = async () => {}, onFailure }, main) {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(sig, async () => {
      console.log(`interrupted (${sig})`);
      await cleanup();
      process.exit(1);
    });
  }
  test(name, { timeout: timeoutMs }, async (t) => {
    context = t;
    t.after(cleanup);
    try {
      await main();
    } catch (e) {
      onFailure?.(e);
      throw e;
    }
  });
}

/**
 * One named check: a subtest of the running suite, or of the running check when called inside one (a
 * subtest waits for its parent's earlier subtests, so a check started inside a check must belong to it).
 * Its failure fails what it belongs to, and the next check runs.
 */
export function check(name, fn) {
  if (context === null) throw new Error(`check "${name}" outside suite()`);
  return context.test(name, async (t) => {
    const outer = context;
    context = t;
    try {
      await fn();
    } finally {
      context = outer;
    }
  });
}

/** A setup step that cannot go on: until() passes it through at once, and it ends the suite. */
export class SetupError extends Error {}

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
