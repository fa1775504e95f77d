// The owner's audit log.
import { api, ok } from '../api.js';
import { Status, Table, useLoad, useTitle, when } from '../ui.js';

export function Audit() {
  const list = useLoad(() => ok(api.GET('/v1/owner/audit', { params: { query: { limit: 100 } } })), []);
  useTitle('Audit log');
  return (
    <section>
      <h1>Audit log</h1>
      <Status text={list.error} kind="error" />
      <Table
        caption="Owner actions, newest first"
        head={['When', 'Who', 'Action', 'Target', 'From']}
        rows={(list.data?.items ?? []).map((e) => [when(e.created_at), e.actor, e.action, e.target_id ? `${e.target_type} ${String(e.target_id).slice(0, 8)}` : '—', e.client_address ?? '—'])}
      />
    </section>
  );
}
