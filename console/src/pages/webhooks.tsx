// Webhook endpoints of the owner's agents, one endpoint's deliveries, re-enable and recover.
import { useState } from 'preact/hooks';
import { api, asView, idempotency, ok, type DeliveryView, type Page, type WebhookView } from '../api.js';
import { ActionForm, Field, Status, Table, useLoad, useTitle, when } from '../ui.js';

export function Webhooks() {
  const list = useLoad(async () => asView<Page<WebhookView>>(await ok(api.GET('/v1/owner/webhooks', { params: { query: { limit: 100 } } }))), []);
  useTitle('Webhooks');
  return (
    <section>
      <h1>Webhooks</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Webhook endpoints of your agents"
        head={['Endpoint', 'Agent', 'State', 'Health', 'Last delivered']}
        rows={(list.data?.items ?? []).map((w) => [
          <a href={`#/webhooks/${w.id}`}>{w.url}</a>,
          w.agent_name,
          <span class={`badge ${w.enabled ? 'active' : 'disabled'}`}>{w.enabled ? 'enabled' : `disabled (${w.disabled_reason})`}</span>,
          <Health w={w} />,
          when(w.last_delivered_at),
        ])}
        empty="No webhook endpoints."
      />
    </section>
  );
}

/** Healthy, or failing since when, how many times in a row, and the last error. */
function Health({ w }: { w: WebhookView }) {
  if (!w.failing_since && w.consecutive_failures === 0) return <span>healthy</span>;
  return (
    <span class="problems">
      failing since {when(w.failing_since ?? w.last_failure_at)}, {w.consecutive_failures} in a row
      {w.last_error && (
        <>
          ; last error <code>{w.last_error}</code>
        </>
      )}
    </span>
  );
}

export function WebhookPage({ id }: { id: string }) {
  const endpoints = useLoad(async () => asView<Page<WebhookView>>(await ok(api.GET('/v1/owner/webhooks', { params: { query: { limit: 100 } } }))), [id]);
  const deliveries = useLoad(async () => asView<Page<DeliveryView>>(await ok(api.GET('/v1/owner/webhooks/{id}/deliveries', { params: { path: { id }, query: { limit: 50 } } }))), [id]);
  const w = (endpoints.data?.items ?? []).find((e) => e.id === id);
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
            {(w.failing_since || w.consecutive_failures > 0) && (
              <>
                {' '}
                — <Health w={w} />
              </>
            )}
          </p>
          <Status text={notice} />
          <div class="row">
            {!w.enabled && (
              <ActionForm
                label="Re-enable"
                action={async () => {
                  await ok(api.POST('/v1/owner/webhooks/{id}/enable', { params: { path: { id }, header: idempotency() } }));
                  setNotice('Endpoint re-enabled.');
                  endpoints.reload();
                }}
              />
            )}
            <ActionForm
              label="Recover events"
              action={async () => {
                const res = asView<{ requeued: number }>(
                  await ok(api.POST('/v1/owner/webhooks/{id}/recover', { params: { path: { id }, header: idempotency() }, body: { since: new Date(since).toISOString() } })),
                );
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
        rows={(deliveries.data?.items ?? []).map((d) => [
          <code>{String(d.event_id).slice(0, 8)}</code>,
          d.event_type,
          d.status,
          d.attempt,
          d.http_status ?? '—',
          d.error_class ?? '—',
          when(d.last_attempt_at),
        ])}
        empty="No deliveries."
      />
    </section>
  );
}
