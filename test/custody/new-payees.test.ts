// Issue 27's approve_new_payees on chain. The account's limits carry `approveNewPayees`: a pay, cheque or x402
// authorization to an address the account never paid (`paidBefore`) reverts ApprovalRequired, even below the
// threshold, unless the owner's ApproveSpend of exactly that transfer is there (consumed); the payee is paid before
// from then on. Matured trusted destinations are exempt; the owner's SetPolicy can list payees paid before. Then
// through the API and Postgres: a first payment waits; the owner's approval without a signature answers 428 with the
// ApproveSpend; agentctl --owner-key-file signs it and the payment executes on chain; the next payment to that payee
// needs nothing; a mirror tampered to approve_new_payees off does not get a new payee paid; the account view and
// reconcile report the flag.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { encodeAbiParameters, getAddress, keccak256, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { laneCall as laneCallData, operationIdBytes32 } from '../../src/chain/accounts.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { signProposal, withOwnerSignature } from '../../src/cli/owner-keys.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { agentctlWith } from '../helpers/agentctl.js';
import { chainEnv, randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import { laneRevert as laneRevertWith, serverLaneKey } from '../helpers/lane.js';
import { testConfigEnv, type TestAgent } from '../helpers/server.js';
import { buildWorld, chainNow, createAgent, erc20BalanceOf, laneCall, mined, ownerCall, randomNonce, reverted, testPolicy, USD, USDC, type Agent, type World } from './world.js';

describe('custody: approve_new_payees on chain (issue 27)', function () {
  this.timeout(180_000);

  describe('AgentAccount', () => {
    let w: World;
    let a: Agent;
    const paidBefore = (who: Address) => w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'paidBefore', args: [who] });
    before(async () => {
      w = await buildWorld();
      // No threshold; any recipient (the owner's choice), so only the new-payee rule stands between the lane and a stranger.
      a = await createAgent(w, { fundUsdc: USDC(500), limits: { perTxUsd: USD(100), perPeriodUsd: USD(1000), approveNewPayees: true, anyRecipient: true } });
    });
    after(async () => w?.node.stop());

    it("refuses a first transfer to a new payee below any threshold without the owner's ApproveSpend; approved once, the payee is paid before", async () => {
      expect((await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'limits' })).approveNewPayees).to.equal(true);
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(1)]))).to.equal('ApprovalRequired');
      const op = operationIdBytes32(randomUUID());
      const approval = await ownerCall(w, a, 'ApproveSpend', { operationId: op, token: w.usdc, to: a.payee, amount: USDC(5) });
      await mined(w, approval);
      // Another amount is not approved.
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(4)]))).to.equal('ApprovalRequired');
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(5)]));
      expect(await paidBefore(a.payee)).to.equal(true);
      // The next payments to that payee need no approval, and the approval was consumed (it cannot be replayed either).
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(3)]));
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(5)]));
      expect(await erc20BalanceOf(w, w.usdc, a.payee)).to.equal(USDC(13));
      expect(await reverted(w, approval)).to.equal('InvalidAccountNonce');
      const key = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'address' }, { type: 'uint256' }], [w.usdc, a.payee, USDC(5)]));
      expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'spendApprovals', args: [key] })).to.equal(0n);
    });

    it('gates cheques and x402 authorizations to a new payee too, and a stranger paid by a cheque the owner approved is paid before', async () => {
      const stranger = randomAddress() as Address;
      const now = await chainNow(w);
      const cheque = (id: Hex, amount: bigint) => laneCall(w, a, 'issueCheque', [id, w.usdc, stranger, amount, now + 7200n, now + 86_400n]);
      expect(await reverted(w, cheque(randomNonce(), USDC(2)))).to.equal('ApprovalRequired');
      expect(await reverted(w, laneCall(w, a, 'authorizeX402', [w.usdc, stranger, USDC(2), 0n, now + 3600n, randomNonce()]))).to.equal('ApprovalRequired');
      await mined(w, ownerCall(w, a, 'ApproveSpend', { operationId: operationIdBytes32(randomUUID()), token: w.usdc, to: stranger, amount: USDC(2) }));
      await mined(w, cheque(randomNonce(), USDC(2)));
      expect(await paidBefore(stranger)).to.equal(true);
      await mined(w, laneCall(w, a, 'authorizeX402', [w.usdc, stranger, USDC(1), 0n, now + 3600n, randomNonce()]));
    });

    it("exempts a trusted destination once its time lock passed; counts the owner's paidBefore list; records payees while the flag is off", async () => {
      const destination = randomAddress() as Address;
      await mined(w, ownerCall(w, a, 'AddTrustedDestination', { destination, unlockAt: (await chainNow(w)) - 1n }));
      await mined(w, laneCall(w, a, 'pay', [w.usdc, destination, USDC(1)]));
      // The owner turns the flag off: payments still record their payees; listed addresses count as paid before.
      const earlier = randomAddress() as Address;
      const whileOff = randomAddress() as Address;
      const stranger = randomAddress() as Address;
      const policy = (on: boolean, paid: Address[]) => ({
        ...testPolicy(w, [a.payee], { perTxUsd: USD(100), perPeriodUsd: USD(1000), approveNewPayees: on, anyRecipient: true }),
        paidBefore: paid,
      });
      await mined(w, ownerCall(w, a, 'SetPolicy', policy(false, [])));
      await mined(w, laneCall(w, a, 'pay', [w.usdc, whileOff, USDC(1)]));
      // The lane cannot sign the list for the owner.
      expect(await reverted(w, ownerCall(w, a, 'SetPolicy', policy(true, [stranger]), { signer: a.lane }))).to.equal('InvalidOwnerSignature');
      await mined(w, ownerCall(w, a, 'SetPolicy', policy(true, [earlier])));
      await mined(w, laneCall(w, a, 'pay', [w.usdc, earlier, USDC(1)]));
      await mined(w, laneCall(w, a, 'pay', [w.usdc, whileOff, USDC(1)]));
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, stranger, USDC(1)]))).to.equal('ApprovalRequired');
    });
  });

  describe('through the API', () => {
    let node: AnvilNode;
    let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
    let dir: string;
    let agent: TestAgent;
    let account: Address;
    let owner: PrivateKeyAccount;
    let auth: Record<string, string>;
    const payee = randomAddress();
    const second = randomAddress();
    const POLICY = { operation_types: 'all', per_period_usd: '500', allowed_assets: ['USDC'], allowed_recipients: [payee, second], approve_new_payees: true };

    const pay = (to: string, amount: string) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset: 'USDC', amount } });
    const approve = (id: string, body: Record<string, unknown> = {}) => s.request('POST', `/v1/owner/approvals/${id}/approve`, { headers: auth, idempotencyKey: randomUUID(), body });
    const laneRevert = async (inner: Hex) => laneRevertWith(node, account, await serverLaneKey(s, agent.walletId), inner);

    before(async () => {
      node = await startAnvil();
      dir = mkdtempSync(path.join(tmpdir(), 'new-payees-'));
      s = await startChainServer(node, { env: { DATA_DIR: dir } });
      const ownerKey = generatePrivateKey();
      owner = privateKeyToAccount(ownerKey);
      writeFileSync(path.join(dir, 'owner.key'), `${ownerKey}\n`, { mode: 0o600 });
      const { owner_id } = await s.services.agents.createOwner(s.db, { email: `new-payees-${randomUUID()}@example.com`, signerAddress: owner.address });
      agent = await s.createAgent({ ownerId: owner_id });
      account = getAddress((await s.db('wallets').where({ id: agent.walletId }).first()).address) as Address;
      await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, POLICY, sig));
      auth = { authorization: `Bearer ${(await s.services.owner.createToken(s.db, owner_id)).token}` };
      await mintAndCredit(s, agent.walletId, account, '1000');
    });
    after(async () => {
      await s?.close();
      await s?.dropDatabase();
      await node?.stop();
    });

    it('the account view reads approve_new_payees from the account', async () => {
      const view = await s.request('GET', `/v1/owner/agents/${agent.agentId}/account`, { headers: auth });
      expect(view.status, view.text).to.equal(200);
      expect(view.body).to.include({ custody: 'account', account });
      expect(view.body.limits).to.include({ approve_new_payees: true, approval_threshold_usd: null });
      expect((await s.services.custody!.state(account)).limits!.approveNewPayees).to.equal(true);
    });

    it('a first payment to a new payee waits; unsigned approval answers 428; agentctl --owner-key-file approves and it executes; the next needs nothing', async () => {
      const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { DATA_DIR: dir })) }), 120_000);
      const res = await pay(payee, '5');
      expect(res.status, res.text).to.equal(200);
      expect(res.body.approval).to.include({ state: 'pending' });
      expect(res.body.approval.reasons).to.deep.equal(['new_payee']);
      const id = String(res.body.operation_id);
      // The server's lane key alone cannot pay the new payee: the account refuses below any threshold.
      expect(await laneRevert(laneCallData.pay(s.token, payee, parseUnits('5', 6)))).to.equal('ApprovalRequired');
      const unsigned = await approve(id);
      expect(unsigned.status, unsigned.text).to.equal(428);
      expect(unsigned.body.error.code).to.equal('owner_signature_required');
      expect(unsigned.body.error.details.typed_data.primaryType).to.equal('ApproveSpend');
      expect(unsigned.body.error.details.typed_data.message).to.include({ operationId: operationIdBytes32(id), token: s.token, to: getAddress(payee), amount: '5000000' });
      const cli = await agentctl('approval', 'approve', id);
      expect(cli.code).to.equal(1);
      expect(cli.stderr).to.include('428 owner_signature_required');
      const out = await json('approval', 'approve', id, '--owner-key-file', path.join(dir, 'owner.key'));
      expect(out).to.include({ operation_id: id, approval_state: 'approved' });
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(payee)).to.equal(5_000_000n);
      expect(await node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paidBefore', args: [getAddress(payee) as Address] })).to.equal(true);
      // The payee is paid before, in the database and on chain: the next payment neither waits nor needs a signature.
      const next = await pay(payee, '7');
      expect(next.status, next.text).to.equal(200);
      expect(next.body.approval ?? null).to.equal(null);
      const [op2] = await s.settle([String(next.body.operation_id)]);
      expect(op2!.status).to.equal('executed');
      expect(await s.usdcBalance(payee)).to.equal(12_000_000n);
    });

    it('a payment signed with the owner-signed typed data of the 428 also settles (second payee)', async () => {
      const res = await pay(second, '3');
      expect(res.body.approval).to.include({ state: 'pending' });
      const id = String(res.body.operation_id);
      const unsigned = await approve(id);
      expect(unsigned.status).to.equal(428);
      const signed = await approve(id, { owner_signature: await signProposal(owner, unsigned.body.error.details) });
      expect(signed.status, signed.text).to.equal(200);
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(second)).to.equal(3_000_000n);
    });

    it("a payment accepted while the flag was off still settles after the owner turns it on: the signed policy lists the database's paid payees", async () => {
      const late = randomAddress();
      const off = { ...POLICY, allowed_recipients: [payee, second, late], approve_new_payees: false };
      await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, off, sig));
      const res = await pay(late, '1');
      expect(res.status, res.text).to.equal(200);
      expect(res.body.approval ?? null).to.equal(null);
      // Not settled yet: the owner turns the flag on; the proposal lists the payees the database counts as paid before.
      const on = { ...off, approve_new_payees: true };
      const unsigned = await s.request('PUT', `/v1/owner/agents/${agent.agentId}/policy`, { headers: auth, idempotencyKey: randomUUID(), body: on });
      expect(unsigned.status, unsigned.text).to.equal(428);
      const message = unsigned.body.error.details.typed_data.message;
      expect(message.limits.approveNewPayees).to.equal(true);
      expect(message.paidBefore).to.have.members([getAddress(payee), getAddress(second), getAddress(late)]);
      await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, on, sig));
      const [op] = await s.settle([String(res.body.operation_id)]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(late)).to.equal(1_000_000n);
    });

    it('with the mirror tampered to approve_new_payees off, a payment to a new payee is accepted by the database but the account refuses it; reconcile reports the drift', async () => {
      const stranger = randomAddress();
      // The owner adds the stranger as an allowed recipient (signed), the flag still on.
      const policy = { ...POLICY, allowed_recipients: [payee, second, stranger] };
      await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, policy, sig));
      expect(await s.services.ledger.policy.chainDrift(s.db, agent.agentId)).to.deep.equal([]);
      await s
        .db('agent_policies')
        .where({ agent_id: agent.agentId })
        .update({ policy: JSON.stringify({ ...policy, approve_new_payees: false }) });
      const res = await pay(stranger, '2');
      expect(res.status, res.text).to.equal(200);
      expect(res.body.approval ?? null).to.equal(null);
      const [op] = await s.settle([String(res.body.operation_id)]);
      expect(op!.status).to.not.equal('executed');
      expect(op!.error_code).to.equal('owner_only_action');
      expect(await s.usdcBalance(stranger)).to.equal(0n);
      const drift = await s.services.ledger.policy.chainDrift(s.db, agent.agentId);
      expect(drift.map((d) => d.kind)).to.include('policy');
      // The account view still shows the account's flag.
      expect((await s.request('GET', `/v1/owner/agents/${agent.agentId}/account`, { headers: auth })).body.limits).to.include({ approve_new_payees: true });
      // The mirror restored, but the refused payment forged as executed: the database counts the stranger as paid
      // before, the account does not, and reconcile says so.
      await s
        .db('agent_policies')
        .where({ agent_id: agent.agentId })
        .update({ policy: JSON.stringify(policy) });
      await s.db('operations').where({ id: op!.id }).update({ status: 'executed' });
      const forged = await s.services.ledger.policy.chainDrift(s.db, agent.agentId);
      expect(forged.map((d) => d.kind)).to.deep.equal(['paid_before']);
      expect(forged[0]).to.include({ address: getAddress(stranger), database: 'paid_before', onchain: 'new_payee' });
    });
  });
});
