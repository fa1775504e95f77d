// The agents overview, one agent's page (status, keys, funding, spending, rate limits) and creating an agent.
import { useState } from 'preact/hooks';
import { api, asView, idempotency, ok, type RateLimitsView } from '../api.js';
import { amount as asAmount } from '../format.js';
import { ActionForm, CopyId, Field, Secret, Status, Table, useLoad, useTitle, when } from '../ui.js';
import { Activity } from './activity.js';
import { Overview, SpendingChart } from './overview.js';
import { OnchainAccount, useAccount } from './account.js';
import { Destinations } from './destinations.js';
import { PolicyEditor } from './policy.js';
import { withStepUp } from '../step-up.js';
import { withPasskeySignature } from '../passkey-sign.js';
import { ShadowPolicy } from './replay.js';

export function Agents() {
  const [version, setVersion] = useState(0);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ agent_id: string; api_key: string } | null>(null);
  useTitle('Agents');
  return (
    <section>
      <h1>Agents</h1>
      <Overview version={version} />
      <h2>Create an agent</h2>
      <ActionForm
        label="Create agent"
        action={async () => {
          const res = await ok(api.POST('/v1/owner/agents', { params: { header: idempotency() }, body: { name } }));
          setCreated(asView<{ agent_id: string; api_key: string }>(res));
          setName('');
          setVersion((v) => v + 1);
        }}
      >
        <Field label="Agent name" name="agent-name" value={name} onInput={setName} required />
      </ActionForm>
      {created && <Secret title="New agent created" lines={[`x-agent-id: ${created.agent_id}`, `x-api-key: ${created.api_key}`]} />}
    </section>
  );
}

export function AgentPage({ id }: { id: string }) {
  const agent = useLoad(() => ok(api.GET('/v1/owner/agents/{agent_id}', { params: { path: { agent_id: id } } })), [id]);
  const limits = useLoad(async () => asView<RateLimitsView>(await ok(api.GET('/v1/owner/agents/{agent_id}/rate-limits', { params: { path: { agent_id: id } } }))), [id]);
  const a = agent.data?.agent;
  const [key, setKey] = useState<string | null>(null);
  const [asset, setAsset] = useState('USDC');
  const [amount, setAmount] = useState('');
  // Bumped by writes on this page so the activity and operations lists read again.
  const [version, setVersion] = useState(0);
  const [shadowVersion, setShadowVersion] = useState(0);
  // evm mode with agent accounts: the account on chain holds the limits and every owner change is the owner's signature.
  const account = useAccount(id, version);
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
              <CopyId id={a.agent_id} label="agent id" />
            </dd>
            <dt>Wallet</dt>
            <dd>
              <CopyId id={a.wallet_address ?? a.wallet_id} label="wallet" />
            </dd>
            <dt>Balances</dt>
            <dd>{a.balances.length ? a.balances.map((b) => asAmount(b.amount, b.asset)).join(', ') : '0'}</dd>
            <dt>API key</dt>
            <dd>
              <code>{a.api_key_prefix}…</code>
            </dd>
          </dl>
          <div class="row">
            <ActionForm
              label="Rotate key"
              action={async () =>
                setKey(
                  asView<{ api_key: string }>(
                    await withStepUp((stepUp) => ok(api.POST('/v1/owner/agents/{agent_id}/rotate-key', { params: { path: { agent_id: id }, header: { ...idempotency(), ...stepUp } } }))),
                  ).api_key,
                )
              }
            />
            {account.known && (!account.onchain || account.passkey) && (
              <ActionForm
                label={a.enabled ? 'Disable agent' : 'Enable agent'}
                danger={a.enabled}
                action={async () => {
                  // A passkey-owned account: the pause (or resume) is signed by the passkey.
                  await withPasskeySignature(account.passkey, a.enabled ? 'Pause' : 'Resume', (signature) =>
                    ok(
                      api.POST(a.enabled ? '/v1/owner/agents/{agent_id}/disable' : '/v1/owner/agents/{agent_id}/enable', {
                        params: { path: { agent_id: id }, header: idempotency() },
                        body: signature ? { owner_signature: signature } : {},
                      }),
                    ),
                  );
                  agent.reload();
                  setVersion((v) => v + 1);
                  return a.enabled ? 'Agent disabled.' : 'Agent enabled.';
                }}
              />
            )}
            <ActionForm
              label="Delete agent"
              danger
              action={async () => {
                if (!confirm(`Delete ${a.name}? Its history stays; it can no longer act.`)) return;
                await ok(api.DELETE('/v1/owner/agents/{agent_id}', { params: { path: { agent_id: id }, header: idempotency() } }));
                location.hash = '#/';
              }}
            />
          </div>
          {key && <Secret title="New API key" lines={[`x-api-key: ${key}`]} />}
          <h2>Fund (simulated chain)</h2>
          <ActionForm
            label="Fund wallet"
            action={async () => {
              const res = asView<{ amount: string; asset: string; available: string }>(
                await ok(api.POST('/v1/owner/agents/{agent_id}/fund', { params: { path: { agent_id: id }, header: idempotency() }, body: { asset, amount } })),
              );
              agent.reload();
              setVersion((v) => v + 1);
              return `Funded ${res.amount} ${res.asset}; available ${res.available}.`;
            }}
          >
            <Field label="Asset" name="fund-asset" value={asset} onInput={setAsset} required />
            <Field label="Amount" name="fund-amount" value={amount} onInput={setAmount} required placeholder="100" />
          </ActionForm>
          <h2>Spending</h2>
          <SpendingChart id={id} version={version} />
          <OnchainAccount view={account.data} error={account.error} />
          {account.known && (
            <>
              <PolicyEditor id={id} readOnly={account.onchain && !account.passkey} signWith={account.passkey} onShadowChange={() => setShadowVersion((v) => v + 1)} />
              <ShadowPolicy id={id} readOnly={account.onchain} version={shadowVersion} onChange={() => setShadowVersion((v) => v + 1)} />
            </>
          )}
          <h2>Rate limits and live usage</h2>
          <Status text={limits.error} kind="error" />
          <Table
            caption="Rate limits"
            head={['Class', 'Limit', 'Burst', 'Window (s)', 'Remaining', 'Resets']}
            rows={(limits.data?.classes ?? []).map((c) => [c.class, c.limit, c.burst, c.window_seconds, c.remaining, when(c.reset_at)])}
          />
          <Activity id={id} version={version} />
          <Destinations agentId={id} agentName={a.name} />
        </>
      )}
    </section>
  );
}
