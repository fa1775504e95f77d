// How an agent's limits are enforced (issue 24). In evm mode with agent accounts the owner's limits live in the
// agent's AgentAccount on chain and every change is the owner's signature. An account owned by the owner's key is shown
// read-only, with the agentctl command that signs each change with that key; an account handed to one of the owner's
// passkeys (issue 27) is changed here, each change signed by the passkey (passkey-sign.ts).
import { api, ok, type Schemas } from '../api.js';
import { usd } from '../format.js';
import { Status, Table, useLoad } from '../ui.js';

export type AccountView = Schemas['OwnerAccountView'];

const ACTIONS: Record<AccountView['commands'][number]['action'], string> = {
  set_policy: 'Set the policy',
  add_destination: 'Add a trusted destination',
  add_recipient: 'Add a payee',
  cancel_one_off: 'Cancel a one-off payment',
  pause: 'Pause the agent',
  resume: 'Resume the agent',
  rotate_lane_key: 'Rotate the lane key',
};

/**
 * The agent's account view; `onchain` is true when the account on chain, not the database, holds the limits, and
 * `passkey` is the credential id of the owner's passkey that owns the account (the console signs with it), else null.
 * `known` is false until the view has answered (or failed): a form that signs, or not, by `passkey` waits for it, or
 * it would send an unsigned change that the account's owner must sign.
 */
export function useAccount(id: string, version = 0) {
  const view = useLoad(() => ok(api.GET('/v1/owner/agents/{agent_id}/account', { params: { path: { agent_id: id } } })), [id, version]);
  const passkey = view.data?.owner_signer_kind === 'passkey' ? (view.data.owner_passkey?.credential_id ?? null) : null;
  return { ...view, known: view.data !== undefined || view.error !== null, onchain: view.data?.custody === 'account', passkey };
}

const cap = (v: string | number | null | undefined, unit: 'usd' | 'count') => (v === null || v === undefined ? 'no cap' : unit === 'usd' ? usd(String(v)) : String(v));

export function OnchainAccount({ view, error }: { view: AccountView | undefined; error: string | null }) {
  if (error) return <Status text={error} kind="error" />;
  if (!view || view.custody !== 'account') return null;
  const l = view.limits;
  const u = view.usage;
  const passkey = view.owner_signer_kind === 'passkey' ? view.owner_passkey : null;
  return (
    <>
      <h2>{passkey ? 'On-chain limits (signed with your passkey)' : 'On-chain limits (read-only)'}</h2>
      {passkey ? (
        <p>
          This agent's limits are enforced by its account contract on chain: not even this server can spend beyond them. The account is owned by your passkey <strong>{passkey.name}</strong>: saving
          the policy, pausing, proposing a destination and approving ask it to sign the exact change.
        </p>
      ) : (
        <p>
          This agent's limits are enforced by its account contract on chain: not even this server can spend beyond them. Every change is signed by your key, so this console shows them read-only; run
          the command under <em>Change them</em> on the machine that holds your key.
        </p>
      )}
      <dl class="facts" aria-label="Account on chain">
        <dt>Account</dt>
        <dd>
          <code>{view.account}</code>
        </dd>
        <dt>Owner signer</dt>
        <dd>
          <code>{view.owner_signer ?? '—'}</code>
          {passkey && ` (passkey ${passkey.name})`}
        </dd>
        <dt>Lane key (agent sender)</dt>
        <dd>
          <code>{view.agent_sender_address ?? '—'}</code>
        </dd>
        <dt>State</dt>
        <dd>{!view.deployed ? 'not deployed yet (nothing can move until you sign a policy)' : view.paused ? 'paused: every lane call reverts' : 'active'}</dd>
        <dt>Policy version</dt>
        <dd>{view.policy_version ?? '—'}</dd>
        <dt>Exposure if this server were compromised</dt>
        <dd>{view.exposure_usd === null ? 'unbounded: no USD cap limits the lane (everything the account holds)' : usd(view.exposure_usd)}</dd>
      </dl>
      <Table
        caption="Caps and usage held by the account"
        head={['Limit', 'Cap', 'Used']}
        rows={[
          ['Per transaction', cap(l.per_tx_usd, 'usd'), '—'],
          [`Per ${l.period ?? 'period'}`, cap(l.per_period_usd, 'usd'), usd(u.period_usd)],
          ['Transactions per period', cap(l.max_txs_per_period, 'count'), String(u.period_txs)],
          ['Lifetime', cap(l.lifetime_usd, 'usd'), usd(u.lifetime_usd)],
        ]}
      />
      {view.commands.length > 0 && <h3>Change them</h3>}
      <ul class="commands" aria-label="agentctl commands for owner changes" hidden={view.commands.length === 0}>
        {view.commands.map((c) => (
          <li>
            {ACTIONS[c.action]}
            <pre>
              <code>{c.command}</code>
            </pre>
          </li>
        ))}
      </ul>
    </>
  );
}
