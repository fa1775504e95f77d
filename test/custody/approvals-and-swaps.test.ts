// Issue 27 acceptance 3 and issue 26 (max_swaps_per_period) on Anvil. The account's limits hold an approval
// threshold: a pay, cheque or x402 authorization worth more needs the owner's ApproveSpend of exactly that transfer,
// consumed by the lane call (a replay of the approval, or a second call, reverts). The swap count per period is
// counted by the account's swap. Then through the API and Postgres: a payment above the threshold waits pending;
// the owner's approval without a signature answers 428 with the ApproveSpend typed data; signed, it is relayed and
// the payment executes on chain; a direct lane call above the threshold with the lane key reverts; /self/limits
// reads the swap cap and count from the account, and reconcile reports a tampered swap cap.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress, parseUnits } from 'viem';
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
import { advance, buildWorld, chainNow, createAgent, erc20BalanceOf, laneCall, mined, ownerCall, reverted, USD, USDC, type Agent, type World } from './world.js';

describe('custody: approval threshold and swap count on chain (issues 27 and 26)', function () {
  this.timeout(180_000);

  describe('AgentAccount', () => {
    let w: World;
    let a: Agent;
    before(async () => {
      w = await buildWorld();
      a = await createAgent(w, { fundUsdc: USDC(500), limits: { perTxUsd: USD(1000), perPeriodUsd: USD(10_000), approvalThresholdUsd: USD(100), maxSwapsPerPeriod: 1 } });
    });
    after(async () => w?.node.stop());

    it("refuses a lane transfer above the threshold without the owner's ApproveSpend; approved, exactly that transfer passes once", async () => {
      const op = operationIdBytes32(randomUUID());
      // At the threshold no approval is needed; one base unit above it is refused.
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(100)]));
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(100) + 1n]))).to.equal('ApprovalRequired');
      expect(await reverted(w, laneCall(w, a, 'issueCheque', [op, w.usdc, a.payee, USDC(150), (await chainNow(w)) + 7200n, (await chainNow(w)) + 86_400n]))).to.equal('ApprovalRequired');
      // The lane cannot approve for the owner.
      expect(await reverted(w, ownerCall(w, a, 'ApproveSpend', { operationId: op, token: w.usdc, to: a.payee, amount: USDC(150) }, { signer: a.lane }))).to.equal('InvalidOwnerSignature');
      const approval = await ownerCall(w, a, 'ApproveSpend', { operationId: op, token: w.usdc, to: a.payee, amount: USDC(150) });
      await mined(w, approval);
      // Another amount or recipient is not approved.
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(151)]))).to.equal('ApprovalRequired');
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(150)]));
      expect(await erc20BalanceOf(w, w.usdc, a.payee)).to.equal(USDC(250));
      // Consumed: the same transfer again is refused, and the owner's signed approval cannot be replayed.
      expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(150)]))).to.equal('ApprovalRequired');
      expect(await reverted(w, approval)).to.equal('InvalidAccountNonce');
      expect(await erc20BalanceOf(w, w.usdc, a.payee)).to.equal(USDC(250));
    });

    it('counts swaps per period: the second swap of the period reverts TooManySwaps, the next period allows one again', async () => {
      const weth = w.dex.tokens.WETH!;
      const swap = () => laneCall(w, a, 'swap', [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, weth], USDC(5), 0n]);
      await mined(w, swap());
      expect((await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'usage' })).periodSwaps).to.equal(1);
      expect(await reverted(w, swap())).to.equal('TooManySwaps');
      // A payment is no swap: it still passes.
      await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(1)]));
      await advance(w, 86_400);
      expect((await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'usage' })).periodSwaps).to.equal(0);
      await mined(w, swap());
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

    const pay = (amount: string) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to: payee, asset: 'USDC', amount } });
    const approve = (id: string, body: Record<string, unknown> = {}) => s.request('POST', `/v1/owner/approvals/${id}/approve`, { headers: auth, idempotencyKey: randomUUID(), body });
    const setPolicy = (policy: Record<string, unknown>) => withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, policy, sig));
    const POLICY = { operation_types: 'all', allowed_assets: ['USDC'], allowed_recipients: [payee], approval_threshold_usd: '100', max_swaps_per_period: 3 };

    before(async () => {
      node = await startAnvil();
      dir = mkdtempSync(path.join(tmpdir(), 'approvals-'));
      s = await startChainServer(node, { env: { DATA_DIR: dir } });
      const ownerKey = generatePrivateKey();
      owner = privateKeyToAccount(ownerKey);
      writeFileSync(path.join(dir, 'owner.key'), `${ownerKey}\n`, { mode: 0o600 });
      const { owner_id } = await s.services.agents.createOwner(s.db, { email: `approvals-${randomUUID()}@example.com`, signerAddress: owner.address });
      agent = await s.createAgent({ ownerId: owner_id });
      account = getAddress((await s.db('wallets').where({ id: agent.walletId }).first()).address) as Address;
      expect(await s.services.custody!.canSignLocally(s.db, agent.agentId)).to.equal(false);
      await setPolicy(POLICY);
      auth = { authorization: `Bearer ${(await s.services.owner.createToken(s.db, owner_id)).token}` };
      await mintAndCredit(s, agent.walletId, account, '1000');
    });
    after(async () => {
      await s?.close();
      await s?.dropDatabase();
      await node?.stop();
    });

    /** A lane call signed with the lane key the server holds (as an attacker with the dump and MASTER_KEY), relayed by a dev account: its custom error. */
    const laneRevert = async (inner: Hex) => laneRevertWith(node, account, await serverLaneKey(s, agent.walletId), inner);

    it("a payment above the threshold waits; the owner's signed ApproveSpend (428 first) is relayed and it executes on chain", async () => {
      const res = await pay('300');
      expect(res.status, res.text).to.equal(200);
      expect(res.body.approval).to.include({ state: 'pending' });
      const id = String(res.body.operation_id);
      // The server's lane key alone cannot move it: the account refuses the lane call above the threshold.
      expect(await laneRevert(laneCallData.pay(s.token, payee, parseUnits('300', 6)))).to.equal('ApprovalRequired');
      const unsigned = await approve(id);
      expect(unsigned.status, unsigned.text).to.equal(428);
      expect(unsigned.body.error.code).to.equal('owner_signature_required');
      const proposal = unsigned.body.error.details;
      expect(proposal).to.include({ account, signer: owner.address });
      expect(proposal.typed_data.primaryType).to.equal('ApproveSpend');
      expect(proposal.typed_data.message).to.include({ operationId: operationIdBytes32(id), token: s.token, to: getAddress(payee), amount: '300000000' });
      // A signature of another key is refused before anything is relayed.
      const forged = await signProposal(privateKeyToAccount(generatePrivateKey()), { ...proposal, signer: undefined }).catch(() => null);
      expect(forged).to.equal(null);
      const signed = await approve(id, { owner_signature: await signProposal(owner, proposal) });
      expect(signed.status, signed.text).to.equal(200);
      expect(signed.body.operation.approval).to.include({ state: 'approved' });
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(payee)).to.equal(300_000_000n);
      // Consumed on chain: the same transfer by the lane key alone reverts again.
      expect(await laneRevert(laneCallData.pay(s.token, payee, parseUnits('300', 6)))).to.equal('ApprovalRequired');
      const again = await approve(id, { owner_signature: await signProposal(owner, proposal) });
      expect(again.status).to.equal(409);
    });

    it("a one-off payment above the threshold: the owner's ApproveSpend lets the lane issue its cheque", async () => {
      const to = payee; // the policy lists its recipients
      const res = await s.request('POST', '/v1/agent/one-off-payments', {
        agent,
        idempotencyKey: randomUUID(),
        body: { to, asset: 'USDC', amount: '150', unlock_delay_seconds: 86_400, expires_in_seconds: 172_800 },
      });
      expect(res.status, res.text).to.equal(200);
      const id = String(res.body.operation_id);
      expect((await s.db('operations').where({ id }).first()).approval_state).to.equal('pending');
      const unsigned = await approve(id);
      expect(unsigned.status, unsigned.text).to.equal(428);
      expect(unsigned.body.error.details.typed_data.message).to.include({ to: getAddress(to), amount: '150000000' });
      const signed = await approve(id, { owner_signature: await signProposal(owner, unsigned.body.error.details) });
      expect(signed.status, signed.text).to.equal(200);
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      const oneOff = await s.db('one_off_payments').where({ operation_id: id }).first();
      const cheque = await node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'cheque', args: [oneOff.cheque_id] });
      expect(cheque).to.include({ status: 1, amount: 150_000_000n });
    });

    it('agentctl approval approve signs ApproveSpend with --owner-key-file (unsigned: 428), and the payment executes', async () => {
      const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { DATA_DIR: dir })) }), 120_000);
      const res = await pay('200');
      expect(res.body.approval).to.include({ state: 'pending' });
      const id = String(res.body.operation_id);
      const unsigned = await agentctl('approval', 'approve', id);
      expect(unsigned.code).to.equal(1);
      expect(unsigned.stderr).to.include('428 owner_signature_required');
      const out = await json('approval', 'approve', id, '--owner-key-file', path.join(dir, 'owner.key'));
      expect(out).to.include({ operation_id: id, approval_state: 'approved' });
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(payee)).to.equal(500_000_000n);
    });

    it('a conversion past max_swaps_per_period is refused by the account even when the database mirror is raised', async () => {
      const trader = await s.agent({ USDC: '1000' });
      const policy = { operation_types: 'all', max_swaps_per_period: 1 };
      await s.services.ledger.policy.set(s.db, trader.agentId, policy); // the development owner key signs
      const convert = async () => {
        const q = await s.request('POST', '/v1/agent/conversions/quote', {
          agent: trader,
          idempotencyKey: randomUUID(),
          body: { from_asset: 'USDC', to_asset: 'WETH', amount: '10', slippage_percent: 1 },
        });
        if (q.status !== 200) return q;
        return s.request('POST', '/v1/agent/conversions', { agent: trader, idempotencyKey: randomUUID(), body: { quote_id: q.body.quote.quote_id } });
      };
      const first = await convert();
      expect(first.status, first.text).to.equal(200);
      expect((await s.settle([first.body.operation_id]))[0]!.status).to.equal('executed');
      const limits = (await s.request('GET', '/v1/agent/self/limits', { agent: trader })).body;
      expect(limits.swap_limits).to.include({ max_swaps_per_period: 1 });
      expect(limits.current_usage).to.include({ swaps_in_period: 1 });
      // The database's gate refuses the second swap; with the mirror raised, the account still does.
      const refused = await convert();
      expect(refused.status).to.equal(403);
      expect(refused.body.error.code).to.equal('limit_exceeded');
      await s
        .db('agent_policies')
        .where({ agent_id: trader.agentId })
        .update({ policy: JSON.stringify({ ...policy, max_swaps_per_period: 1000 }) });
      const usdcBefore = await s.usdcBalance(trader.address);
      const second = await convert();
      expect(second.status, second.text).to.equal(200);
      const [op] = await s.settle([second.body.operation_id]);
      expect(op!.status).to.not.equal('executed');
      expect(op!.error_code).to.equal('limit_exceeded');
      expect(await s.usdcBalance(trader.address)).to.equal(usdcBefore);
      expect((await s.services.custody!.state(trader.address)).usage!.periodSwaps).to.equal(1);
    });

    it('/self/limits reads the swap cap and count from the account; reconcile reports a tampered swap cap', async () => {
      const limits = (await s.request('GET', '/v1/agent/self/limits', { agent })).body;
      expect(limits.swap_limits).to.include({ max_swaps_per_period: 3 });
      expect(limits.current_usage).to.include({ swaps_in_period: 0 });
      const state = await s.services.custody!.state(account);
      expect(state.limits!.maxSwapsPerPeriod).to.equal(3);
      expect(state.limits!.approvalThresholdUsd).to.equal(10_000_000_000n);
      expect(await s.services.ledger.policy.chainDrift(s.db, agent.agentId)).to.deep.equal([]);
      await s
        .db('agent_policies')
        .where({ agent_id: agent.agentId })
        .update({ policy: JSON.stringify({ ...POLICY, max_swaps_per_period: 1000 }) });
      const drift = await s.services.ledger.policy.chainDrift(s.db, agent.agentId);
      expect(drift.map((d) => d.kind)).to.include('policy');
      // The account still shows its own cap.
      expect((await s.request('GET', '/v1/agent/self/limits', { agent })).body.swap_limits).to.include({ max_swaps_per_period: 3 });
    });
  });
});
