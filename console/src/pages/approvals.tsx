// The approval inbox across every agent (issue 27): what, to whom, how much, why it needs approval and how long until
// it expires; approve with a passkey (a fresh assertion bound to this approval, or, for an agent account owned by the
// passkey, its signature of the ApproveSpend the account requires), or reject (no step-up).
import { startAuthentication, type PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/browser';
import { useState } from 'preact/hooks';
import { api, ApiFailure, idempotency, ok, type Schemas } from '../api.js';
import { signWithPasskey } from '../passkey-sign.js';
import { amount, shortId, until, usd } from '../format.js';
import { ActionForm, Status, Table, useLoad, useTitle, when } from '../ui.js';

type Item = Schemas['ApprovalItem'];

const why = (a: Item['approval']) => a.reasons.map((r) => (r === 'above_threshold' ? `above ${usd(a.threshold_usd)}` : 'new payee')).join(', ');

/**
 * Approves with a passkey. Asked first without a proof: an agent account's transfer in evm mode answers 428 with the
 * ApproveSpend to sign, which the passkey that owns the account signs (issue 27); otherwise the step-up: assertion
 * options issued for this operation alone, lasting 5 minutes.
 */
export async function approveWithPasskey(operationId: string, agentId: string): Promise<void> {
  const approve = (body: Schemas['ApproveRequest']) => ok(api.POST('/v1/owner/approvals/{operation_id}/approve', { params: { path: { operation_id: operationId }, header: idempotency() }, body }));
  try {
    await approve({});
    return;
  } catch (err) {
    if (!(err instanceof ApiFailure)) throw err;
    if (err.error.code === 'owner_signature_required' && err.error.details) {
      const account = await ok(api.GET('/v1/owner/agents/{agent_id}/account', { params: { path: { agent_id: agentId } } }));
      const credential = account.owner_signer_kind === 'passkey' ? account.owner_passkey?.credential_id : undefined;
      if (!credential) throw err; // the owner's key signs it (agentctl approval approve … --owner-key-file)
      await approve({ owner_signature: await signWithPasskey(credential, err.error.details as Record<string, unknown>, 'ApproveSpend') });
      return;
    }
    if (err.error.code !== 'validation_failed') throw err;
  }
  const { options } = await ok(api.POST('/v1/owner/passkeys/assertion-options', { params: { header: idempotency() }, body: { purpose: 'approve', operation_id: operationId } }));
  const assertion = await startAuthentication({ optionsJSON: options as unknown as PublicKeyCredentialRequestOptionsJSON });
  await ok(
    api.POST('/v1/owner/approvals/{operation_id}/approve', {
      params: { path: { operation_id: operationId }, header: idempotency() },
      body: { assertion: assertion as unknown as Schemas['WebAuthnCredentialJson'] },
    }),
  );
}

export function Approvals() {
  useTitle('Approvals');
  const pending = useLoad(() => ok(api.GET('/v1/owner/approvals', { params: { query: { state: 'pending', limit: 100 } } })), []);
  const decided = useLoad(() => ok(api.GET('/v1/owner/approvals', { params: { query: { limit: 20 } } })), []);
  // Announced outside the table: the decided row leaves the list (and its form with it).
  const [notice, setNotice] = useState<string | null>(null);
  const reload = (text: string) => {
    setNotice(text);
    pending.reload();
    decided.reload();
  };
  const label = (i: Item) => `${amount(i.amount, i.asset_symbol)} from ${i.agent_name}`;
  return (
    <>
      <h1>Approvals</h1>
      <p>Operations your agents asked for that wait for you. Their funds are held; nothing leaves until you approve with your passkey.</p>
      <Status text={pending.error} kind="error" />
      <Status text={notice} />
      <Table
        caption="Waiting for your approval"
        head={['Agent', 'What', 'To', 'Amount', 'Why', 'Expires', 'Decide']}
        rows={(pending.data?.items ?? []).map((i) => [
          i.agent_name,
          i.human_message,
          i.to_address ? <code title={i.to_address}>{`${i.to_address.slice(0, 6)}…${i.to_address.slice(-4)}`}</code> : '—',
          <>
            {amount(i.amount, i.asset_symbol)}
            <br />
            <small>{usd(i.amount_usd)}</small>
          </>,
          why(i.approval),
          <time dateTime={i.approval.expires_at} title={when(i.approval.expires_at)}>
            {until(i.approval.expires_at)}
          </time>,
          <div class="row">
            <ActionForm
              label="Approve with passkey"
              name={`Approve ${label(i)}`}
              action={async () => {
                await approveWithPasskey(i.operation_id, i.agent_id);
                reload(`Approved: ${label(i)}.`);
              }}
            />
            <ActionForm
              label="Reject"
              name={`Reject ${label(i)}`}
              danger
              action={async () => {
                await ok(api.POST('/v1/owner/approvals/{operation_id}/reject', { params: { path: { operation_id: i.operation_id }, header: idempotency() } }));
                reload(`Rejected: ${label(i)}.`);
              }}
            />
          </div>,
        ])}
        empty="Nothing waits for your approval."
      />
      <h2>Recent decisions</h2>
      <Table
        caption="Recent approvals"
        head={['Operation', 'Agent', 'Amount', 'State', 'Decided']}
        rows={(decided.data?.items ?? [])
          .filter((i) => i.approval.state !== 'pending')
          .map((i) => [
            <code title={i.operation_id}>{shortId(i.operation_id)}</code>,
            i.agent_name,
            amount(i.amount, i.asset_symbol),
            <span class={`badge ${i.approval.state}`}>{i.approval.state}</span>,
            when(i.approval.decided_at),
          ])}
        empty="No decision yet."
      />
    </>
  );
}
