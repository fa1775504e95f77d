// Applications connected through OAuth, with revoke.
import { api, asView, idempotency, ok, type ConnectedAppView, type Page } from '../api.js';
import { ActionForm, Status, Table, useLoad, useTitle, when } from '../ui.js';

export function Apps() {
  const list = useLoad(async () => asView<Page<ConnectedAppView>>(await ok(api.GET('/v1/owner/connected-apps'))), []);
  useTitle('Connected applications');
  return (
    <section>
      <h1>Connected applications</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Applications with access to your agents"
        head={['Application', 'Agent', 'Scopes', 'Status', 'Granted', 'Last used', 'Actions']}
        rows={(list.data?.items ?? []).map((g) => [
          g.client_name ?? g.client_id,
          g.agent_name,
          g.scope.join(' '),
          g.status,
          when(g.created_at),
          when(g.last_used_at),
          g.status === 'active' ? (
            <ActionForm
              label="Revoke"
              name={`Revoke ${g.client_name ?? g.client_id}`}
              danger
              action={async () => {
                await ok(api.POST('/v1/owner/connected-apps/{grant_id}/revoke', { params: { path: { grant_id: g.grant_id }, header: idempotency() } }));
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
