// The experiments pages' lists: `#/experiments` (recorded runs, newest first, paged and filtered on the
// server, the filters in the URL; filtered to one task, that task's totals head the list) and
// `#/experiments?view=tasks` (each task grid under its heading with its totals and its newest runs).
import { useEffect, useState } from 'preact/hooks';
import { expApi, modelLabel, PAGE_SIZE, RUNS_PER_TASK, STATUSES, TASKS_PER_PAGE, type ListQuery, type TaskTotals } from '../experiments';
import { fmtDuration, fmtNum, fmtTime, NA } from '../format';
import type { Experiment } from '../jobRecord';
import { href, navigate, type Route } from '../router';
import { useResource, type Resource } from '../useResource';

/** A failed request's message where its data would be, with when it is tried again and "retry now". */
export function LoadError({ res }: { res: Resource<unknown> }) {
  if (!res.error) return null;
  const secs = res.retryAt === null ? null : Math.max(1, Math.round((res.retryAt - Date.now()) / 1000));
  return (
    <p class="error load-error" role="alert">
      Could not load: {res.error}.{secs !== null && ` Retrying in ${secs} s.`}{' '}
      <button type="button" onClick={res.reload}>
        Retry now
      </button>
    </p>
  );
}

function queryOf(route: Route): ListQuery {
  const page = Number(route.query.get('page') ?? '1');
  return {
    status: route.query.get('status') ?? undefined,
    user: route.query.get('user') ?? undefined,
    task: route.query.get('task') ?? undefined,
    page: Number.isInteger(page) && page > 0 ? page : 1,
  };
}

function listHref(q: ListQuery): string {
  return href(['experiments'], { status: q.status, user: q.user, task: q.task, page: q.page > 1 ? q.page : undefined });
}

function tasksHref(q: ListQuery): string {
  return href(['experiments'], { view: 'tasks', user: q.user, task: q.task, page: q.page > 1 ? q.page : undefined });
}

const ownerOf = (t: { user: string | null; uid: number | null }) => t.user ?? (t.uid !== null ? `uid ${t.uid}` : NA);

/** The seed's GPU column: "2 (H100 80GB HBM3) 📊", or "N/A" for a run without GPUs. */
export function GpuCell({ e }: { e: Experiment }) {
  if (e.gpuCount <= 0) return <td class="gpu-col nowrap">N/A</td>;
  const model = modelLabel(e.gpuModel);
  return (
    <td class="gpu-col nowrap" title={e.gpuModel ?? ''}>
      {e.gpuCount}
      {model && ` (${model})`}
      {e.hasMonitoring && (
        <span class="mon-mark" title="GPU monitoring data available" aria-label="GPU monitoring data available">
          {' '}
          📊
        </span>
      )}
    </td>
  );
}

export function StatusBadge({ status }: { status: string | null }) {
  return <span class={`badge job ${status ?? 'unknown'}`}>{status ?? NA}</span>;
}

function Filters({ q, grouped }: { q: ListQuery; grouped: boolean }) {
  const [user, setUser] = useState(q.user ?? '');
  const [task, setTask] = useState(q.task ?? '');
  useEffect(() => setUser(q.user ?? ''), [q.user]);
  useEffect(() => setTask(q.task ?? ''), [q.task]);
  const apply = (next: Partial<ListQuery>) => {
    const to = { ...q, ...next, page: 1 };
    navigate(grouped ? tasksHref(to) : listHref(to));
  };
  return (
    <form
      class="exp-filters"
      onSubmit={(ev) => {
        ev.preventDefault();
        apply({ user: user.trim() || undefined, task: task.trim() || undefined });
      }}
    >
      {!grouped && (
        <label>
          status{' '}
          <select id="filter-status" value={q.status ?? ''} onChange={(ev) => apply({ status: (ev.target as HTMLSelectElement).value || undefined })}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option value={s} key={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      )}
      <label>
        user <input id="filter-user" value={user} maxLength={64} onInput={(ev) => setUser((ev.target as HTMLInputElement).value)} />
      </label>
      <label>
        task <input id="filter-task" value={task} maxLength={200} onInput={(ev) => setTask((ev.target as HTMLInputElement).value)} />
      </label>
      <button type="submit">Filter</button>
      <span class="exp-views">
        {grouped ? <a href={href(['experiments'])}>all runs</a> : <strong>all runs</strong>} ·{' '}
        {grouped ? <strong>by task</strong> : <a href={href(['experiments'], { view: 'tasks' })}>by task</a>}
      </span>
    </form>
  );
}

function Pager({ page, total, to, perPage = PAGE_SIZE }: { page: number; total: number; to: (page: number) => string; perPage?: number }) {
  const pages = Math.max(1, Math.ceil(total / perPage));
  return (
    <nav class="pager" aria-label="pages">
      {page > 1 ? (
        <a id="page-prev" href={to(page - 1)}>
          ← newer
        </a>
      ) : (
        <span class="muted">← newer</span>
      )}
      <span class="muted">
        page {page} of {pages} ({total} in all)
      </span>
      {page < pages ? (
        <a id="page-next" href={to(page + 1)}>
          older →
        </a>
      ) : (
        <span class="muted">older →</span>
      )}
    </nav>
  );
}

/** Runs as table rows: id/name, task, status, user, start, duration, exit, command, the GPU column. */
function RunsTable({ jobs, id }: { jobs: Experiment[]; id?: string }) {
  return (
    <div class="table-wrap">
      <table id={id} class="exp-table">
        <thead>
          <tr>
            <th>id / name</th>
            <th>task</th>
            <th>status</th>
            <th>user</th>
            <th>start</th>
            <th>duration</th>
            <th class="num">exit</th>
            <th>command</th>
            <th>GPUs</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((e) => (
            <tr key={e.id} data-id={e.id}>
              <td>
                <a class="mono" href={href(['experiments', e.id])}>
                  {e.id}
                </a>
                {e.name && <div class="muted">{e.name}</div>}
              </td>
              <td>{e.task ? <a href={listHref({ page: 1, task: e.task })}>{e.task}</a> : <span class="muted">—</span>}</td>
              <td class="nowrap">
                <StatusBadge status={e.status} />
              </td>
              <td>{e.user ?? (e.uid !== null ? `uid ${e.uid}` : NA)}</td>
              <td class="nowrap" title={e.startedAt !== null ? new Date(e.startedAt).toISOString() : ''}>
                {fmtTime(e.startedAt)}
              </td>
              <td class="nowrap">{e.endedAt === null ? (e.status === 'running' ? 'running' : NA) : fmtDuration(e.startedAt, e.endedAt)}</td>
              <td class="num">{e.exitCode ?? NA}</td>
              <td class="command" title={e.command ?? ''}>
                {e.command ?? NA}
              </td>
              <GpuCell e={e} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A task's totals over all its runs (from the store, not from a page of them). */
function TaskTotalsLine({ t }: { t: TaskTotals }) {
  const item = (k: string, v: string, label: string) => (
    <span class="task-total" data-k={k}>
      <strong>{v}</strong> {label}
    </span>
  );
  return (
    <p class="task-totals">
      {item('runs', String(t.runs), t.runs === 1 ? 'run' : 'runs')} · {item('succeeded', String(t.succeeded), 'succeeded')} ·{' '}
      {item('failed', String(t.failed), 'failed')}
      {t.running > 0 && <> · {item('running', String(t.running), 'running')}</>} · {item('gpu-hours', fmtNum(t.gpuHours, 2), 'GPU-hours')}
      {t.lastStartedAt !== null && <span class="muted"> · last started {fmtTime(t.lastStartedAt)}</span>}
    </p>
  );
}

export function List({ route }: { route: Route }) {
  const q = queryOf(route);
  const res = useResource((s) => expApi.page(q, s), [listHref(q)]);
  const page = res.data;
  // Filtered to one task: its totals head the list (one row per owner of a task of that name).
  const totals = useResource(
    (s) => (q.task ? expApi.tasks({ task: q.task, user: q.user, page: 1, limit: 20 }, s) : Promise.resolve(null)),
    [q.task ?? null, q.user ?? null],
  );
  return (
    <section class="panel" id="exp-list">
      <h2>
        Experiments {page && <span class="count">{page.total}</span>}
      </h2>
      <Filters q={q} grouped={false} />
      {q.task && totals.current && totals.current.tasks.length > 0 && (
        <div id="list-task-totals" class="task-head">
          {totals.current.tasks.map((t) => (
            <div key={`${t.uid ?? ''}\u0000${t.user ?? ''}`} data-task={t.task}>
              <h3>
                {t.task} <span class="muted">· {ownerOf(t)}</span>
              </h3>
              <TaskTotalsLine t={t} />
            </div>
          ))}
        </div>
      )}
      <LoadError res={res} />
      {page === null ? (
        !res.error && <p class="empty">Loading…</p>
      ) : page.jobs.length === 0 ? (
        <p class="empty">No runs match.</p>
      ) : (
        <RunsTable jobs={page.jobs} id="exp-table" />
      )}
      {page && <Pager page={q.page} total={page.total} to={(p) => listHref({ ...q, page: p })} />}
    </section>
  );
}

// ---------------------------------------------------------------------------------------------------
// Grouped by task

/** One task grid: its heading and totals, and its newest runs (all of them through the filtered list). */
function TaskGroup({ t }: { t: TaskTotals }) {
  const runsOf: ListQuery = { task: t.task, user: t.user ?? undefined, uid: t.uid ?? undefined, page: 1, limit: RUNS_PER_TASK };
  const key = `group:${t.task}:${t.uid ?? ''}:${t.user ?? ''}:${t.runs}:${t.lastStartedAt ?? ''}`;
  const res = useResource((s) => expApi.page(runsOf, s), [key]);
  const page = res.data;
  const all = listHref({ task: t.task, user: t.user ?? undefined, page: 1 });
  return (
    <section class="task-group" data-task={t.task} data-user={t.user ?? ''}>
      <h3>
        <a href={all}>{t.task}</a> <span class="muted">· {ownerOf(t)}</span>
      </h3>
      <TaskTotalsLine t={t} />
      <LoadError res={res} />
      {page === null ? (
        !res.error && <p class="empty">Loading…</p>
      ) : (
        <>
          <RunsTable jobs={page.jobs} />
          {page.total > page.jobs.length && (
            <p class="more">
              <a href={all}>all {page.total} runs of {t.task} →</a>
            </p>
          )}
        </>
      )}
    </section>
  );
}

export function Tasks({ route }: { route: Route }) {
  const q = queryOf(route);
  const key = tasksHref(q);
  const res = useResource((s) => expApi.tasks({ user: q.user, task: q.task, page: q.page }, s), [key]);
  const doc = res.data;
  return (
    <section class="panel" id="exp-tasks">
      <h2>Experiments by task {doc && <span class="count">{doc.total}</span>}</h2>
      <Filters q={q} grouped={true} />
      <LoadError res={res} />
      {doc === null ? (
        !res.error && <p class="empty">Loading…</p>
      ) : doc.tasks.length === 0 ? (
        <p class="empty">
          No task runs recorded (<code>gpufleet task run TASK.json -- CMD</code>).
        </p>
      ) : (
        <div id="task-groups">
          {doc.tasks.map((t) => (
            <TaskGroup key={`${t.task}\u0000${t.uid ?? ''}\u0000${t.user ?? ''}`} t={t} />
          ))}
        </div>
      )}
      {doc && <Pager page={q.page} total={doc.total} perPage={TASKS_PER_PAGE} to={(p) => tasksHref({ ...q, page: p })} />}
    </section>
  );
}
