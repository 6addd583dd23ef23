// Submitting a Docker-image job to the agent (POST /api/v1/jobs) and cancelling one (DELETE), shown only
// where the agent has submission on, and only to the holder of its write token: a job runs in the node's
// Docker engine, which is as powerful as root. Everyone else sees nothing of it.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, auth, type Job } from '../api';
import { useResource } from '../useResource';

const inFlight = (j: Job) => j.submittedVia === 'api' && (j.status === 'waiting' || j.status === 'running');

export function SubmitJob({ jobs, onChange }: { jobs: Job[] | null; onChange: () => void }) {
  const [tokenVersion, setTokenVersion] = useState(0);
  // What this page's credentials may do, asked again when a token is given.
  const sessionDoc = useResource((signal) => api.session(signal), [tokenVersion]);
  const session = sessionDoc.error === null ? sessionDoc.data : null;
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);

  const flying = (jobs ?? []).filter(inFlight);
  // While a submitted job waits or runs, its row changes within seconds: look again every 2 s.
  useEffect(() => {
    if (!flying.length) return;
    const t = setInterval(onChange, 2000);
    return () => clearInterval(t);
  }, [flying.length, onChange]);

  if (!session?.jobsSubmit) return null;
  if (!session.writer) {
    return (
      <section class="panel" id="submit-job">
        <h2>Submit a job</h2>
        <form
          class="token-form"
          onSubmit={(e) => {
            e.preventDefault();
            auth.set(new FormData(e.currentTarget as HTMLFormElement).get('token') as string);
            setTokenVersion((v) => v + 1);
          }}
        >
          <p class="muted">This agent runs Docker-image jobs for the holder of its token (the agent's token file).</p>
          <input name="token" type="password" autocomplete="off" placeholder="the agent's token" aria-label="agent token" />
          <button type="submit">use token</button>
        </form>
      </section>
    );
  }

  const submit = async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const text = (k: string) => String(f.get(k) ?? '').trim();
    const name = text('name');
    setBusy(true);
    try {
      const job = await api.submitJob({
        image: text('image'),
        args: text('args') ? text('args').split(/\s+/) : [],
        gpus: Number(text('gpus') || 1),
        min_memory_mb: Number(text('min_memory_mb') || 0),
        wait_s: Number(text('wait_s') || 0),
        ...(name ? { name } : {}),
      });
      setMessage({ ok: true, text: `job ${job.id} submitted (${job.status ?? 'waiting'})` });
      onChange();
    } catch (e) {
      setMessage({ ok: false, text: e instanceof ApiError || e instanceof Error ? e.message : String(e) });
    } finally {
      setBusy(false);
    }
  };
  const cancel = async (id: string) => {
    try {
      await api.cancelJob(id);
      setMessage({ ok: true, text: `job ${id} cancelled` });
    } catch (e) {
      setMessage({ ok: false, text: e instanceof Error ? e.message : String(e) });
    }
    onChange();
  };

  return (
    <section class="panel" id="submit-job">
      <h2>Submit a job</h2>
      <form
        class="job-form"
        onSubmit={(e) => {
          e.preventDefault();
          void submit(e.currentTarget as HTMLFormElement);
        }}
      >
        <label>
          image <input name="image" required maxLength={512} placeholder="nvcr.io/nvidia/pytorch:24.01-py3" />
        </label>
        <label>
          command <input name="args" placeholder="python train.py (empty: the image's own)" />
        </label>
        <label>
          GPUs <input name="gpus" type="number" min={1} max={1024} value="1" />
        </label>
        <label>
          free memory (MiB) <input name="min_memory_mb" type="number" min={0} value="8000" />
        </label>
        <label>
          wait (s) <input name="wait_s" type="number" min={0} max={604800} value="300" />
        </label>
        <label>
          name <input name="name" maxLength={200} />
        </label>
        <button type="submit" disabled={busy}>
          submit
        </button>
      </form>
      {message && <p class={message.ok ? 'ok' : 'error'}>{message.text}</p>}
      {flying.length > 0 && (
        <ul class="in-flight">
          {flying.map((j) => (
            <li key={j.id}>
              <span class={`badge job ${j.status}`}>{j.status}</span> <span class="mono">{j.id}</span> {j.name}{' '}
              <button type="button" class="cancel-job" data-job={j.id} onClick={() => void cancel(j.id)}>
                cancel
              </button>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
