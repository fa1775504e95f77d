// An agent's operations (filtered by status and type) and activity log.
import { useState } from 'preact/hooks';
import { api, asView, ok, type paths, type Schemas } from '../api.js';
import { Status, Table, useLoad, when } from '../ui.js';

type OperationsQuery = NonNullable<paths['/v1/owner/agents/{agent_id}/operations']['get']['parameters']['query']>;
type OperationStatus = NonNullable<OperationsQuery['status']>;
type OperationFilterType = NonNullable<OperationsQuery['type']>;

export function Activity({ id, version }: { id: string; version: number }) {
  const [status, setStatus] = useState('');
  const [type, setType] = useState('');
  const query = { limit: 20, ...(status ? { status: status as OperationStatus } : {}), ...(type ? { type: type as OperationFilterType } : {}) };
  const ops = useLoad(
    async () => asView<Schemas['OperationListPage']>(await ok(api.GET('/v1/owner/agents/{agent_id}/operations', { params: { path: { agent_id: id }, query } }))),
    [id, status, type, version],
  );
  const activity = useLoad(
    async () => asView<Schemas['ActivityListPage']>(await ok(api.GET('/v1/owner/agents/{agent_id}/activity', { params: { path: { agent_id: id }, query: { limit: 20 } } }))),
    [id, version],
  );
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
      <Table
        caption="Operations"
        head={['Type', 'Status', 'Message', 'Created']}
        rows={(ops.data?.items ?? []).map((o) => [o.type, o.status, o.human_message, when(o.created_at)])}
        empty="No operations."
      />
      <h2>Activity</h2>
      <Table caption="Activity" head={['Type', 'Description', 'When']} rows={(activity.data?.items ?? []).map((r) => [r.type, r.description, when(r.created_at)])} empty="No activity." />
    </>
  );
}
