// The approved-payees rule on chain, on Anvil and Postgres: a policy without allowed_recipients pays the owner's
// recipients only (issue 26), and the AgentAccount enforces it too: its payees are the recipients' addresses (no
// anyRecipient). Adding a recipient through the owner API re-signs and relays the policy first (the development
// owner key; without it 428 owner_signature_required and nothing written); a lane call paying anyone else reverts;
// a recipient inserted by SQL is not payable (execution_failed, nothing moved) and reconcile reports it.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { laneCall } from '../../src/chain/accounts.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { devOwnerKeyPath } from '../../src/lib/owner-keys.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import { laneRevert as laneRevertWith, serverLaneKey } from '../helpers/lane.js';
import type { TestAgent } from '../helpers/server.js';

const ADMIN = 'approved-payees-admin-token-0123456789abcdef';

describe('custody: a policy without allowed_recipients pays the recipients only, on chain too', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };
  let dataDir: string;
  let agent: TestAgent;
  let account: Address;
  const recipient = randomAddress();

  const pay = (body: Record<string, unknown>) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body });
  const addRecipient = (address: string) =>
    s.request('POST', `/v1/owner/agents/${agent.agentId}/recipients`, {
      headers: { authorization: `Bearer ${ADMIN}` },
      idempotencyKey: randomUUID(),
      body: { kind: 'one_off', name: `R ${address.slice(2, 8)}`, address },
    });
  const isPayee = (address: Address) => node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'isPayee', args: [address] });

  /** A lane call signed by the lane key the server holds, relayed by a dev account: the account's custom error, or null. */
  const laneRevert = async (inner: Hex) => laneRevertWith(node, account, await serverLaneKey(s, agent.walletId), inner, { mine: false });

  before(async () => {
    node = await startAnvil();
    dataDir = mkdtempSync(path.join(tmpdir(), 'custody-payees-'));
    s = await startChainServer(node, { env: { DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN } });
    agent = await s.createAgent({});
    const wallet = await s.db('wallets').where({ id: agent.walletId }).first();
    expect(wallet.custody).to.equal('account');
    account = wallet.address as Address;
    // No allowed_recipients: the approved payees only (signed with the development owner key, relayed).
    await s.services.ledger.policy.set(s.db, agent.agentId, { operation_types: 'all', allowed_assets: ['USDC'], per_tx_usd: '100', per_period_usd: '1000' });
    await mintAndCredit(s, agent.walletId, account, '1000');
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('makes a recipient added through the owner API payable on chain, and a payment to it executes', async () => {
    const before = (await s.services.custody!.state(account)).policyVersion;
    expect((await s.services.custody!.state(account)).limits!.anyRecipient).to.equal(false);
    expect(await isPayee(recipient)).to.equal(false);
    const added = await addRecipient(recipient);
    expect(added.status, JSON.stringify(added.body)).to.equal(201);
    const state = await s.services.custody!.state(account);
    expect(state.policyVersion).to.equal(before + 1n);
    expect(await isPayee(recipient)).to.equal(true);
    expect(await s.services.ledger.policy.chainDrift(s.db, agent.agentId)).to.deep.equal([]);

    const res = await pay({ to: recipient, asset: 'USDC', amount: '5' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(recipient)).to.equal(5_000_000n);
  });

  it('reverts a lane call straight to the chain paying an address that is not a payee', async () => {
    expect(await laneRevert(laneCall.pay(s.token, randomAddress(), 1_000_000n))).to.equal('RecipientNotAllowed');
    expect(await laneRevert(laneCall.pay(s.token, recipient, 1_000_000n))).to.equal(null);
  });

  it('answers 428 owner_signature_required with the typed data and writes nothing without the owner key', async () => {
    const keyFile = devOwnerKeyPath(dataDir, agent.ownerId);
    renameSync(keyFile, `${keyFile}.away`);
    try {
      const other = randomAddress();
      const res = await addRecipient(other);
      expect(res.status).to.equal(428);
      expect(res.body.error.code).to.equal('owner_signature_required');
      expect(res.body.error.details.typed_data).to.include({ primaryType: 'SetPolicy' });
      expect(await s.db('recipients').where({ agent_id: agent.agentId }).whereRaw('lower(address) = lower(?)', [other])).to.have.length(0);
      expect(await isPayee(other)).to.equal(false);
    } finally {
      renameSync(`${keyFile}.away`, keyFile);
    }
  });

  it('does not pay a recipient inserted by SQL: nothing moves on chain and reconcile reports the drift', async () => {
    const intruder = randomAddress();
    const now = new Date();
    await s
      .db('recipients')
      .insert({ id: randomUUID(), agent_id: agent.agentId, kind: 'one_off', name: 'Intruder', address: intruder, chain: 'base', asset_symbol: null, created_at: now, updated_at: now });
    const usdcBefore = await s.usdcBalance(account);

    const res = await pay({ to: intruder, asset: 'USDC', amount: '50' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200); // the tampered mirror lets it through; the account does not
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('execution_failed');
    expect(op!.error_code).to.equal('recipient_not_allowed');
    expect(op!.tx_hash).to.equal(null);
    expect(await s.usdcBalance(intruder)).to.equal(0n);
    expect(await s.usdcBalance(account)).to.equal(usdcBefore);
    expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).held).to.equal(0n);

    const drift = await s.services.ledger.policy.chainDrift(s.db, agent.agentId);
    expect(drift.map((d) => d.kind).sort()).to.deep.equal(['payee', 'policy']);
    expect(drift.find((d) => d.kind === 'payee')).to.include({ address: intruder, database: 'recipient', onchain: 'not_payee' });
  });
});
