// The owner console: sign in with an e-mailed code, then agents, keys, policy, limits, activity,
// trusted destinations, webhooks (deliveries, re-enable, recover), connected apps and the audit log.
// Hash routes keep every page a plain GET of /console.
import { render } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { ApiFailure, call, del, get, post, put, setCsrfToken, type Json } from './api.js';
import './styles.css';

type Route = { page: 'agents' } | { page: 'agent'; id: string } | { page: 'destinations' } | { page: 'webhooks' } | { page: 'webhook'; id: string } | { page: 'apps' } | { page: 'audit' };

function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  if (parts[0] === 'agents' && parts[1]) return { page: 'agent', id: parts[1] };
  if (parts[0] === 'webhooks' && parts[1]) return { page: 'webhook', id: parts[1] };
  if (parts[0] === 'destinations' || parts[0] === 'webhooks' || parts[0] === 'apps' || parts[0] === 'audit') return { page: parts[0] } as Route;
  return { page: 'agents' };
}

function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** Loads `fn` now and again on `reload()`; shows errors in place. */
function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: string | null; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    fn().then(
      (d) => live && (setData(d), setError(null)),
      (e: unknown) => live && setError(message(e)),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data, error, reload: useCallback(() => setTick((t) => t + 1), []) };
}

/** The window title names the page, as its heading does (WCAG 2.4.2). */
function useTitle(text: string | undefined) {
  useEffect(() => {
    document.title = text ? `${text} · Agent API console` : 'Agent API console';
  }, [text]);
}

const message = (e: unknown) => (e instanceof ApiFailure ? `${e.error.message}` : e instanceof Error ? e.message : String(e));

function Status({ text, kind = 'info' }: { text: string | null; kind?: 'info' | 'error' }) {
  if (!text) return null;
  return (
    <p class={kind === 'error' ? 'status error' : 'status'} role={kind === 'error' ? 'alert' : 'status'}>
      {text}
    </p>
  );
}

/** A form whose submit runs `action`; errors and results are announced next to it. */
function ActionForm(props: { label: string; action: () => Promise<string | void>; children?: ComponentChildren; danger?: boolean; name?: string }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ text: string; kind: 'info' | 'error' } | null>(null);
  return (
    <form
      class="action"
      aria-label={props.name ?? props.label}
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        try {
          const text = await props.action();
          setResult(text ? { text, kind: 'info' } : null);
        } catch (err) {
          setResult({ text: message(err), kind: 'error' });
        } finally {
          setBusy(false);
        }
      }}
    >
      {props.children}
      <button type="submit" disabled={busy} class={props.danger ? 'danger' : ''}>
        {props.label}
      </button>
      <Status text={result?.text ?? null} kind={result?.kind} />
    </form>
  );
}

function Field(props: { label: string; name: string; id?: string; value: string; onInput: (v: string) => void; type?: 'text' | 'email' | 'datetime-local'; required?: boolean; placeholder?: string; focus?: boolean; autoComplete?: string; inputMode?: 'numeric' }) {
  const id = props.id ?? `f-${props.name}`;
  const ref = useRef<HTMLInputElement>(null);
  // A field that replaces the one just submitted takes the focus, so keyboard and screen-reader users land on it.
  useEffect(() => {
    if (props.focus) ref.current?.focus();
  }, []);
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input ref={ref} id={id} name={props.name} autoComplete={props.autoComplete} inputMode={props.inputMode} type={(props.type ?? 'text') as 'text'} value={props.value} required={props.required} placeholder={props.placeholder} onInput={(e) => props.onInput((e.target as HTMLInputElement).value)} />
    </div>
  );
}

function Table(props: { caption: string; head: string[]; rows: ComponentChildren[][]; empty?: string }) {
  if (props.rows.length === 0) return <p class="empty">{props.empty ?? 'Nothing yet.'}</p>;
  return (
    <div class="scroll" role="region" aria-label={props.caption} tabIndex={0}>
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>{props.head.map((h) => <th scope="col">{h}</th>)}</tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr>{r.map((c) => <td>{c}</td>)}</tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

// ---------------------------------------------------------------- sign in

function SignIn(props: { onSignedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState(false);
  useTitle('Sign in');
  return (
    <main class="signin">
      <h1>Agent API console</h1>
      {!sent ? (
        <ActionForm
          label="Send me a code"
          name="Sign in"
          action={async () => {
            await call('POST', '/console/auth/code', { email });
            setSent(true);
          }}
        >
          <Field label="E-mail address" name="email" type="email" value={email} onInput={setEmail} required autoComplete="email" />
        </ActionForm>
      ) : (
        <ActionForm
          label="Sign in"
          name="Enter the code"
          action={async () => {
            const res = await call('POST', '/console/auth/verify', { code });
            setCsrfToken(res.csrf_token as string);
            props.onSignedIn();
          }}
        >
          <p>We sent a 6-digit code to {email}.</p>
          <Field label="One-time code" name="code" value={code} onInput={setCode} required placeholder="123456" focus autoComplete="one-time-code" inputMode="numeric" />
        </ActionForm>
      )}
    </main>
  );
}

// ---------------------------------------------------------------- agents

function Agents() {
  const { data, error, reload } = useLoad(() => get('/agents?limit=100'), []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<Json | null>(null);
  useTitle('Agents');
  return (
    <section>
      <h1>Agents</h1>
      <Status text={error} kind="error" />
      <Table
        caption="Your agents"
        head={['Name', 'Status', 'Balances', 'Created']}
        rows={(data?.items ?? []).map((a: Json) => [
          <a href={`#/agents/${a.agent_id}`}>{a.name}</a>,
          <span class={`badge ${a.status}`}>{a.status}</span>,
          a.balances.length ? a.balances.map((b: Json) => `${b.amount} ${b.asset}`).join(', ') : '0',
          when(a.created_at),
        ])}
        empty="No agents yet."
      />
      <h2>Create an agent</h2>
      <ActionForm
        label="Create agent"
        action={async () => {
          const res = await post('/agents', { name });
          setCreated(res);
          setName('');
          reload();
        }}
      >
        <Field label="Agent name" name="agent-name" value={name} onInput={setName} required />
      </ActionForm>
      {created && <Secret title="New agent created" lines={[`x-agent-id: ${created.agent_id}`, `x-api-key: ${created.api_key}`]} />}
    </section>
  );
}

function Secret(props: { title: string; lines: string[] }) {
  return (
    <div class="secret" role="status">
      <strong>{props.title}</strong> — shown once, copy it now:
      <pre>{props.lines.join('\n')}</pre>
    </div>
  );
}

function AgentPage({ id }: { id: string }) {
  const agent = useLoad(() => get(`/agents/${id}`), [id]);
  const limits = useLoad(() => get(`/agents/${id}/rate-limits`), [id]);
  const a = agent.data?.agent as Json | undefined;
  const [key, setKey] = useState<string | null>(null);
  const [asset, setAsset] = useState('USDC');
  const [amount, setAmount] = useState('');
  // Bumped by writes on this page so the activity and operations lists read again.
  const [version, setVersion] = useState(0);
  useTitle(a?.name);
  return (
    <section>
      <p>
        <a href="#/">← Agents</a>
      </p>
      <Status text={agent.error} kind="error" />
      {a && (
        <>
          <h1>{a.name}</h1>
          <dl class="facts">
            <dt>Status</dt>
            <dd>
              <span class={`badge ${a.status}`}>{a.status}</span>
            </dd>
            <dt>Agent id</dt>
            <dd>
              <code>{a.agent_id}</code>
            </dd>
            <dt>Wallet</dt>
            <dd>
              <code>{a.wallet_address ?? a.wallet_id}</code>
            </dd>
            <dt>Balances</dt>
            <dd>{a.balances.length ? a.balances.map((b: Json) => `${b.amount} ${b.asset}`).join(', ') : '0'}</dd>
            <dt>API key</dt>
            <dd>
              <code>{a.api_key_prefix}…</code>
            </dd>
          </dl>
          <div class="row">
            <ActionForm label="Rotate key" action={async () => setKey(((await post(`/agents/${id}/rotate-key`)) as Json).api_key)} />
            <ActionForm
              label={a.enabled ? 'Disable agent' : 'Enable agent'}
              danger={a.enabled}
              action={async () => {
                await post(`/agents/${id}/${a.enabled ? 'disable' : 'enable'}`);
                agent.reload();
              }}
            />
            <ActionForm
              label="Delete agent"
              danger
              action={async () => {
                if (!confirm(`Delete ${a.name}? Its history stays; it can no longer act.`)) return;
                await del(`/agents/${id}`);
                location.hash = '#/';
              }}
            />
          </div>
          {key && <Secret title="New API key" lines={[`x-api-key: ${key}`]} />}
          <h2>Fund (simulated chain)</h2>
          <ActionForm
            label="Fund wallet"
            action={async () => {
              const res = await post(`/agents/${id}/fund`, { asset, amount });
              agent.reload();
              setVersion((v) => v + 1);
              return `Funded ${res.amount} ${res.asset}; available ${res.available}.`;
            }}
          >
            <Field label="Asset" name="fund-asset" value={asset} onInput={setAsset} required />
            <Field label="Amount" name="fund-amount" value={amount} onInput={setAmount} required placeholder="100" />
          </ActionForm>
          <PolicyEditor id={id} />
          <h2>Rate limits and live usage</h2>
          <Status text={limits.error} kind="error" />
          <Table
            caption="Rate limits"
            head={['Class', 'Limit', 'Burst', 'Window (s)', 'Remaining', 'Resets']}
            rows={(limits.data?.classes ?? []).map((c: Json) => [c.class, c.limit, c.burst, c.window_seconds, c.remaining, when(c.reset_at)])}
          />
          <Activity id={id} version={version} />
          <Destinations agentId={id} agentName={a.name} />
        </>
      )}
    </section>
  );
}

function PolicyEditor({ id }: { id: string }) {
  const current = useLoad(() => get(`/agents/${id}/policy`), [id]);
  const [text, setText] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const value = text ?? JSON.stringify(current.data?.policy ?? { operation_types: [] }, null, 2);
  const parse = (): Json => {
    try {
      return JSON.parse(value) as Json;
    } catch {
      setProblems(['The policy is not valid JSON.']);
      throw new Error('The policy is not valid JSON.');
    }
  };
  return (
    <>
      <h2>Policy</h2>
      <div class="field">
        <label for="policy">Policy (JSON, contract §9 keys)</label>
        <textarea id="policy" rows={10} value={value} aria-invalid={problems.length > 0} aria-describedby="policy-problems" onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
        <ul id="policy-problems" class="problems" aria-live="polite">
          {problems.map((p) => (
            <li>{p}</li>
          ))}
        </ul>
      </div>
      <div class="row">
        <ActionForm
          label="Validate"
          action={async () => {
            const res = await post(`/agents/${id}/policy/validate`, parse());
            setProblems(res.problems as string[]);
            return res.valid ? 'The policy is valid.' : '';
          }}
        />
        <ActionForm
          label="Save policy"
          action={async () => {
            try {
              const res = await put(`/agents/${id}/policy`, parse());
              setProblems([]);
              setText(JSON.stringify(res.policy, null, 2));
              return 'Policy saved.';
            } catch (err) {
              if (err instanceof ApiFailure && err.error.details?.problems) setProblems(err.error.details.problems);
              throw err;
            }
          }}
        />
      </div>
    </>
  );
}

function Activity({ id, version }: { id: string; version: number }) {
  const [status, setStatus] = useState('');
  const [type, setType] = useState('');
  const q = `?limit=20${status ? `&status=${encodeURIComponent(status)}` : ''}${type ? `&type=${encodeURIComponent(type)}` : ''}`;
  const ops = useLoad(() => get(`/agents/${id}/operations${q}`), [id, q, version]);
  const activity = useLoad(() => get(`/agents/${id}/activity?limit=20`), [id, version]);
  return (
    <>
      <h2>Operations</h2>
      <div class="row filters">
        <div class="field">
          <label for="op-status">Status</label>
          <select id="op-status" value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
            {['', 'pending', 'executed', 'failed', 'policy_rejected', 'cancelled'].map((s) => (
              <option value={s}>{s || 'any'}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="op-type">Type</label>
          <select id="op-type" value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
            {['', 'payment', 'one_off_payment', 'withdrawal', 'conversion', 'earn', 'borrow', 'trusted_destination'].map((s) => (
              <option value={s}>{s || 'any'}</option>
            ))}
          </select>
        </div>
      </div>
      <Status text={ops.error} kind="error" />
      <Table caption="Operations" head={['Type', 'Status', 'Message', 'Created']} rows={(ops.data?.items ?? []).map((o: Json) => [o.type, o.status, o.human_message, when(o.created_at)])} empty="No operations." />
      <h2>Activity</h2>
      <Table caption="Activity" head={['Type', 'Description', 'When']} rows={(activity.data?.items ?? []).map((r: Json) => [r.type, r.description, when(r.created_at)])} empty="No activity." />
    </>
  );
}

/** An agent's trusted destinations; `agentName` keeps the table and form names unique when several agents' lists share a page. */
function Destinations({ agentId, agentName }: { agentId: string; agentName: string }) {
  // Field ids unique per instance: a label's `for` must name its own field, not another agent's.
  const uid = useId();
  const list = useLoad(() => get(`/agents/${agentId}/trusted-destinations?limit=100`), [agentId]);
  const [address, setAddress] = useState('');
  const [label, setLabel] = useState('');
  const act = (id: string, what: string, action: 'confirm' | 'cancel' | 'remove', text: string) => (
    <ActionForm
      label={text}
      name={`${text} ${what}`}
      danger={action !== 'confirm'}
      action={async () => {
        await post(`/trusted-destinations/${id}/${action}`);
        list.reload();
      }}
    />
  );
  return (
    <>
      <h2>Trusted destinations</h2>
      <Status text={list.error} kind="error" />
      <Table
        caption={`Trusted destinations of ${agentName}`}
        head={['Label', 'Address', 'Status', 'Confirmable from', 'Actions']}
        rows={(list.data?.items ?? []).map((d: Json) => [
          d.label,
          <code>{d.address}</code>,
          <span class={`badge ${d.status}`}>{d.status}</span>,
          when(d.confirmable_at),
          <div class="row">
            {d.status === 'pending' && act(d.id, d.label, 'confirm', 'Approve')}
            {d.status === 'pending' && act(d.id, d.label, 'cancel', 'Cancel')}
            {d.status === 'confirmed' && act(d.id, d.label, 'remove', 'Remove')}
          </div>,
        ])}
        empty="No trusted destinations."
      />
      <ActionForm
        label="Propose destination"
        name={`Propose a destination for ${agentName}`}
        action={async () => {
          await post(`/agents/${agentId}/trusted-destinations`, { kind: 'crypto', chain: 'base', address, label, timelock_seconds: 0 });
          setAddress('');
          setLabel('');
          list.reload();
        }}
      >
        <Field label="Address (0x…)" name="dest-address" id={`${uid}-address`} value={address} onInput={setAddress} required />
        <Field label="Label" name="dest-label" id={`${uid}-label`} value={label} onInput={setLabel} required />
      </ActionForm>
    </>
  );
}

function AllDestinations() {
  const agents = useLoad(() => get('/agents?limit=100'), []);
  useTitle('Trusted destinations');
  return (
    <section>
      <h1>Trusted destinations</h1>
      <Status text={agents.error} kind="error" />
      {(agents.data?.items ?? []).map((a: Json) => (
        <div class="card">
          <h2 class="h3">{a.name}</h2>
          <Destinations agentId={a.agent_id} agentName={a.name} />
        </div>
      ))}
    </section>
  );
}

// ---------------------------------------------------------------- webhooks

function Webhooks() {
  const list = useLoad(() => get('/webhooks?limit=100'), []);
  useTitle('Webhooks');
  return (
    <section>
      <h1>Webhooks</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Webhook endpoints of your agents"
        head={['Endpoint', 'Agent', 'State', 'Failures', 'Last delivered']}
        rows={(list.data?.items ?? []).map((w: Json) => [
          <a href={`#/webhooks/${w.id}`}>{w.url}</a>,
          w.agent_name,
          <span class={`badge ${w.enabled ? 'active' : 'disabled'}`}>{w.enabled ? 'enabled' : `disabled (${w.disabled_reason})`}</span>,
          w.consecutive_failures,
          when(w.last_delivered_at),
        ])}
        empty="No webhook endpoints."
      />
    </section>
  );
}

function WebhookPage({ id }: { id: string }) {
  const endpoints = useLoad(() => get('/webhooks?limit=100'), [id]);
  const deliveries = useLoad(() => get(`/webhooks/${id}/deliveries?limit=50`), [id]);
  const w = (endpoints.data?.items ?? []).find((e: Json) => e.id === id) as Json | undefined;
  const [since, setSince] = useState(() => new Date(Date.now() - 72 * 3600_000).toISOString().slice(0, 16));
  // The re-enable form goes away once the endpoint is enabled, so its outcome is announced here.
  const [notice, setNotice] = useState<string | null>(null);
  useTitle(w?.url);
  return (
    <section>
      <p>
        <a href="#/webhooks">← Webhooks</a>
      </p>
      <Status text={endpoints.error ?? deliveries.error} kind="error" />
      {w && (
        <>
          <h1 class="wrap">{w.url}</h1>
          <p>
            Agent {w.agent_name}: <span class={`badge ${w.enabled ? 'active' : 'disabled'}`}>{w.enabled ? 'enabled' : `disabled (${w.disabled_reason})`}</span>
            {w.failing_since && <> — failing since {when(w.failing_since)}</>}
          </p>
          <Status text={notice} />
          <div class="row">
            {!w.enabled && (
              <ActionForm
                label="Re-enable"
                action={async () => {
                  await post(`/webhooks/${id}/enable`);
                  setNotice('Endpoint re-enabled.');
                  endpoints.reload();
                }}
              />
            )}
            <ActionForm
              label="Recover events"
              action={async () => {
                const res = await post(`/webhooks/${id}/recover`, { since: new Date(since).toISOString() });
                deliveries.reload();
                return `${res.requeued} events queued again, in their original order.`;
              }}
            >
              <Field label="Recover events since" name="recover-since" type="datetime-local" value={since} onInput={setSince} required />
            </ActionForm>
          </div>
        </>
      )}
      <h2>Deliveries</h2>
      <div class="row">
        <button type="button" onClick={deliveries.reload}>
          Refresh deliveries
        </button>
      </div>
      <Table
        caption="Delivery log"
        head={['Event', 'Type', 'Status', 'Attempts', 'HTTP', 'Error', 'Last attempt']}
        rows={(deliveries.data?.items ?? []).map((d: Json) => [<code>{String(d.event_id).slice(0, 8)}</code>, d.event_type, d.status, d.attempt, d.http_status ?? '—', d.error_class ?? '—', when(d.last_attempt_at)])}
        empty="No deliveries."
      />
    </section>
  );
}

// ---------------------------------------------------------------- connected apps, audit

function Apps() {
  const list = useLoad(() => get('/connected-apps'), []);
  useTitle('Connected applications');
  return (
    <section>
      <h1>Connected applications</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Applications with access to your agents"
        head={['Application', 'Agent', 'Scopes', 'Status', 'Granted', 'Last used', 'Actions']}
        rows={(list.data?.items ?? []).map((g: Json) => [
          g.client_name ?? g.client_id,
          g.agent_name,
          (g.scope as string[]).join(' '),
          g.status,
          when(g.created_at),
          when(g.last_used_at),
          g.status === 'active' ? (
            <ActionForm
              label="Revoke"
              name={`Revoke ${g.client_name ?? g.client_id}`}
              danger
              action={async () => {
                await post(`/connected-apps/${encodeURIComponent(g.grant_id)}/revoke`);
                list.reload();
              }}
            />
          ) : (
            '—'
          ),
        ])}
        empty="No connected applications."
      />
    </section>
  );
}

function Audit() {
  const list = useLoad(() => get('/audit?limit=100'), []);
  useTitle('Audit log');
  return (
    <section>
      <h1>Audit log</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Owner actions, newest first"
        head={['When', 'Who', 'Action', 'Target', 'From']}
        rows={(list.data?.items ?? []).map((e: Json) => [when(e.created_at), e.actor, e.action, e.target_id ? `${e.target_type} ${String(e.target_id).slice(0, 8)}` : '—', e.client_address ?? '—'])}
      />
    </section>
  );
}

// ---------------------------------------------------------------- shell

function App() {
  const route = useRoute();
  const [session, setSession] = useState<Json | null | undefined>(undefined);
  const load = useCallback(() => {
    call('GET', '/console/auth/session').then(
      (s) => {
        setCsrfToken(s.csrf_token as string);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);
  useEffect(load, [load]);
  if (session === undefined)
    return (
      <main>
        <p class="status" role="status">
          Loading…
        </p>
      </main>
    );
  if (session === null) return <SignIn onSignedIn={load} />;
  const nav: [string, string, Route['page'][]][] = [
    ['#/', 'Agents', ['agents', 'agent']],
    ['#/destinations', 'Destinations', ['destinations']],
    ['#/webhooks', 'Webhooks', ['webhooks', 'webhook']],
    ['#/apps', 'Connected apps', ['apps']],
    ['#/audit', 'Audit log', ['audit']],
  ];
  return (
    <>
      <header>
        <nav aria-label="Console">
          <ul>
            {nav.map(([href, text, pages]) => (
              <li>
                <a href={href} aria-current={pages.includes(route.page) ? 'page' : undefined}>
                  {text}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>{session.email}</span>
          <button
            type="button"
            onClick={async () => {
              await call('POST', '/console/auth/logout');
              setSession(null);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main>
        {route.page === 'agents' && <Agents />}
        {route.page === 'agent' && <AgentPage id={route.id} />}
        {route.page === 'destinations' && <AllDestinations />}
        {route.page === 'webhooks' && <Webhooks />}
        {route.page === 'webhook' && <WebhookPage id={route.id} />}
        {route.page === 'apps' && <Apps />}
        {route.page === 'audit' && <Audit />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
