// Trusted destinations: one agent's list with its actions, and every agent's on one page.
import { useId, useState } from 'preact/hooks';
import { api, asView, idempotency, ok, type Schemas } from '../api.js';
import { ActionForm, Field, Status, Table, useLoad, useTitle, when } from '../ui.js';
import { useAccount } from './account.js';
import { withPasskeySignature } from '../passkey-sign.js';

/** An agent's trusted destinations; `agentName` keeps the table and form names unique when several agents' lists share a page. */
export function Destinations({ agentId, agentName }: { agentId: string; agentName: string }) {
  // Field ids unique per instance: a label's `for` must name its own field, not another agent's.
  const uid = useId();
  const list = useLoad(
    async () =>
      asView<Schemas['TrustedDestinationListPage']>(await ok(api.GET('/v1/owner/agents/{agent_id}/trusted-destinations', { params: { path: { agent_id: agentId }, query: { limit: 100 } } }))),
    [agentId],
  );
  // evm mode with agent accounts: adding a destination is the owner's signature (agentctl destination add), or the
  // passkey's when the account is owned by one (signed here).
  const account = useAccount(agentId);
  const [address, setAddress] = useState('');
  const [label, setLabel] = useState('');
  const act = (id: string, what: string, action: 'confirm' | 'cancel' | 'remove', text: string) => (
    <ActionForm
      label={text}
      name={`${text} ${what}`}
      danger={action !== 'confirm'}
      action={async () => {
        await ok(api.POST(`/v1/owner/trusted-destinations/{id}/${action}`, { params: { path: { id }, header: idempotency() } }));
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
        rows={(list.data?.items ?? []).map((d) => [
          d.label,
          <code>{d.address}</code>,
          <span class={`badge ${d.status}`}>{d.status}</span>,
          when(d.unlocks_at),
          <div class="row">
            {d.status === 'pending' && act(d.id, d.label, 'confirm', 'Approve')}
            {d.status === 'pending' && act(d.id, d.label, 'cancel', 'Cancel')}
            {d.status === 'confirmed' && act(d.id, d.label, 'remove', 'Remove')}
          </div>,
        ])}
        empty="No trusted destinations."
      />
      {/* Nothing to offer until the account view has answered: the form would show for an account the owner's key must sign. */}
      {!account.known ? null : account.onchain && !account.passkey ? (
        <p class="status">
          Adding a destination to this agent's account is signed by your key: <code>{account.data?.commands.find((c) => c.action === 'add_destination')?.command}</code>
        </p>
      ) : (
        <ActionForm
          label="Propose destination"
          name={`Propose a destination for ${agentName}`}
          action={async () => {
            const body = { kind: 'crypto' as const, chain: 'base', address, label, timelock_seconds: 0 };
            await withPasskeySignature(account.passkey, 'AddTrustedDestination', (signature) =>
              ok(
                api.POST('/v1/owner/agents/{agent_id}/trusted-destinations', {
                  params: { path: { agent_id: agentId }, header: idempotency() },
                  body: signature ? { ...body, owner_signature: signature } : body,
                }),
              ),
            );
            setAddress('');
            setLabel('');
            list.reload();
          }}
        >
          <Field label="Address (0x…)" name="dest-address" id={`${uid}-address`} value={address} onInput={setAddress} required />
          <Field label="Label" name="dest-label" id={`${uid}-label`} value={label} onInput={setLabel} required />
        </ActionForm>
      )}
    </>
  );
}

export function AllDestinations() {
  const agents = useLoad(() => ok(api.GET('/v1/owner/agents', { params: { query: { limit: 100 } } })), []);
  useTitle('Trusted destinations');
  return (
    <section>
      <h1>Trusted destinations</h1>
      <Status text={agents.error} kind="error" />
      {(agents.data?.items ?? []).map((a) => (
        <div class="card">
          <h2 class="h3">{a.name}</h2>
          <Destinations agentId={a.agent_id} agentName={a.name} />
        </div>
      ))}
    </section>
  );
}
