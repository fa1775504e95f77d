// Issue 24, acceptance 4 on Anvil and Postgres: the owner's flows end to end through agentctl (subprocesses talking
// to the running server) with `--owner-key-file`, a key the test writes (mode 0600) and the server never sees. The
// owner is created with `--signer`; each change is proposed unsigned (428 owner_signature_required with the EIP-712
// typed data), signed by agentctl here and sent again. Each outcome is checked on chain: the policy, the trusted
// destination's time lock (confirming early reverts, the API answers time_delay_not_reached), a one-off payment's
// cheque cancelled before unlock (the funds stay in the account), the pause (every lane call reverts until resume)
// and the lane key's rotation (the old key's calls revert).
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { laneCall, readAccountState } from '../../src/chain/accounts.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import { agentctlWith } from '../helpers/agentctl.js';
import { laneRevert as laneRevertWith, serverLaneKey } from '../helpers/lane.js';
import { testConfigEnv, type TestAgent } from '../helpers/server.js';

const ADMIN = 'owner-flows-admin-token-0123456789abcdef0123';
const FAR = 2n ** 40n;

describe('custody: owner flows with agentctl --owner-key-file (issue 24, acceptance 4)', function () {
  this.timeout(300_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let dir: string;
  let keyFile: string;
  let owner: PrivateKeyAccount;
  let agent: TestAgent;
  let account: Address;
  const payee = randomAddress();

  const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { ADMIN_TOKEN: ADMIN, AGENT_API_BASE_URL: s.baseUrl, DATA_DIR: dir })) }), 120_000);
  const signed = (...args: string[]) => json(...args, '--owner-key-file', keyFile);
  const state = () => readAccountState(node.client, account);
  const read = <T>(functionName: string, args: readonly unknown[]) =>
    node.client.readContract({ address: account, abi: agentAccountAbi, functionName: functionName as 'cheque', args: args as never }) as Promise<T>;

  /** The lane key the server holds now (opened as an attacker with the dump and MASTER_KEY would). */
  const laneKey = () => serverLaneKey(s, agent.walletId);

  /** A lane call signed by `lane`, relayed by a dev account: the account's custom error if it reverts (also mined), else null. */
  const laneRevert = (lane: PrivateKeyAccount, inner: Hex) => laneRevertWith(node, account, lane, inner);

  const pay = (body: Record<string, unknown>) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body });

  before(async () => {
    node = await startAnvil();
    dir = mkdtempSync(path.join(tmpdir(), 'owner-flows-'));
    s = await startChainServer(node, { env: { ADMIN_TOKEN: ADMIN, DATA_DIR: dir } });
    keyFile = path.join(dir, 'owner.key');
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('creates the owner with --signer and its agent, whose wallet is an account owned by that signer', async () => {
    const key = generatePrivateKey();
    owner = privateKeyToAccount(key);
    writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
    expect(statSync(keyFile).mode & 0o777).to.equal(0o600);
    const created = await json('owner', 'create', '--email', `flows-${randomUUID()}@example.com`, '--signer', owner.address);
    expect(created).to.include({ signer_address: owner.address });
    const made = await json('agent', 'create', '--owner', String(created.owner_id), '--name', 'flows bot');
    agent = {
      agentId: String(made.agent_id),
      walletId: String(made.wallet_id),
      ownerId: String(created.owner_id),
      apiKey: String(made.api_key),
      headers: { 'x-agent-id': String(made.agent_id), 'x-api-key': String(made.api_key) },
    };
    const wallet = await s.db('wallets').where({ id: agent.walletId }).first();
    expect(wallet.custody).to.equal('account');
    account = getAddress(wallet.address) as Address;
    // No development key for this owner: the server cannot sign for it.
    expect(await s.services.custody!.canSignLocally(s.db, agent.agentId)).to.equal(false);
  });

  it('sets a policy: unsigned it is 428 owner_signature_required with the typed data; signed with the key file it holds on chain', async () => {
    const policyFile = path.join(dir, 'policy.json');
    writeFileSync(policyFile, JSON.stringify({ operation_types: 'all', allowed_assets: ['USDC'], per_tx_usd: '10', per_period_usd: '30', allowed_recipients: 'all' }));
    const unsigned = await agentctl('agent', 'set-policy', agent.agentId, '--file', policyFile);
    expect(unsigned.code).to.equal(1);
    expect(unsigned.stderr).to.include('428 owner_signature_required');
    // The API's answer to a wallet: the EIP-712 typed data for the account, the signer, the nonce and deadline.
    const proposed = await s.request('PUT', `/v1/owner/agents/${agent.agentId}/policy`, {
      headers: { authorization: `Bearer ${ADMIN}` },
      idempotencyKey: randomUUID(),
      body: { operation_types: 'all', allowed_assets: ['USDC'], per_tx_usd: '10', per_period_usd: '30', allowed_recipients: 'all' },
    });
    expect(proposed.status).to.equal(428);
    expect(proposed.body.error.code).to.equal('owner_signature_required');
    expect(proposed.body.error.details).to.include({ account, signer: owner.address, nonce: '0' });
    expect(proposed.body.error.details.typed_data).to.include({ primaryType: 'SetPolicy' });
    expect((await state()).deployed).to.equal(false);

    const set = await signed('agent', 'set-policy', agent.agentId, '--file', policyFile);
    expect((set.policy as Record<string, unknown>).per_tx_usd).to.equal('10');
    const onchain = await state();
    expect(onchain).to.include({ deployed: true, owner: owner.address, paused: false, policyVersion: 1n });
    expect(onchain.limits).to.include({ perTxUsd: 1_000_000_000n, perPeriodUsd: 3_000_000_000n, anyRecipient: true });

    // Funds for the flows below, credited by the deposit watcher.
    await mintAndCredit(s, agent.walletId, account, '100');
    expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available).to.equal(parseUnits('100', 6));
  });

  it('adds a trusted destination with its time lock on chain: confirming early reverts, and the API answers time_delay_not_reached', async () => {
    const destination = randomAddress();
    const added = await signed('destination', 'add', agent.agentId, '--kind', 'crypto', '--address', destination, '--label', 'cold', '--timelock-seconds', '3600');
    const row = await s.db('trusted_destinations').where({ id: added.destination_id }).first();
    const unlockAt = await read<bigint>('trustedUnlockAt', [destination]);
    expect(unlockAt).to.equal(BigInt(Math.floor(new Date(row.confirmable_at).getTime() / 1000)));
    expect(Number(unlockAt)).to.be.greaterThan(Math.floor(Date.now() / 1000) + 3000);
    // The chain refuses the lane's confirm before the unlock time (the lane key itself, bypassing the API).
    expect(await laneRevert(await laneKey(), laneCall.confirmTrustedDestination(destination))).to.equal('TimeLockNotReached');
    const early = await agentctl('destination', 'confirm', String(added.destination_id));
    expect(early.code).to.equal(1);
    expect(early.stderr).to.include('time_delay_not_reached');
    expect((await s.db('trusted_destinations').where({ id: added.destination_id }).first()).status).to.equal('pending');
  });

  it('cancels a one-off payment before its unlock: the cheque is cancelled on chain and the funds stay in the account', async () => {
    const to = randomAddress();
    const res = await s.request('POST', '/v1/agent/one-off-payments', {
      agent,
      idempotencyKey: randomUUID(),
      body: { to, asset: 'USDC', amount: '5', unlock_delay_seconds: 86_400, expires_in_seconds: 172_800 },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('executed');
    const oneOff = await s.db('one_off_payments').where({ operation_id: op!.id }).first();
    expect(oneOff.cheque_id).to.match(/^0x[0-9a-f]{64}$/);
    expect((await read<{ status: number; amount: bigint }>('cheque', [oneOff.cheque_id])).status).to.equal(1); // pending
    expect(await s.usdcBalance(account)).to.equal(parseUnits('100', 6));

    const cancelled = await signed('one-off', 'cancel', oneOff.id);
    expect(cancelled).to.include({ one_off_payment_id: oneOff.id, status: 'cancelled' });
    expect((await read<{ status: number }>('cheque', [oneOff.cheque_id])).status).to.equal(3); // cancelled
    expect(await s.usdcBalance(account)).to.equal(parseUnits('100', 6));
    expect(await s.usdcBalance(to)).to.equal(0n);
    expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available).to.equal(parseUnits('100', 6));
  });

  it('pauses the account (agent disable): every lane call reverts until resume (agent enable)', async () => {
    const lane = await laneKey();
    expect(await laneRevert(lane, laneCall.pay(s.token, payee, 1_000_000n))).to.equal(null);
    expect(await signed('agent', 'disable', agent.agentId)).to.include({ agent_id: agent.agentId, enabled: false });
    expect((await state()).paused).to.equal(true);
    expect(await laneRevert(lane, laneCall.pay(s.token, payee, 1_000_000n))).to.equal('EnforcedPause');
    expect(await laneRevert(lane, laneCall.issueCheque(`0x${'ab'.repeat(32)}`, s.token, payee, 1_000_000n, FAR, FAR + 10n))).to.equal('EnforcedPause');
    expect(await laneRevert(lane, laneCall.confirmTrustedDestination(payee))).to.equal('EnforcedPause');

    expect(await signed('agent', 'enable', agent.agentId)).to.include({ agent_id: agent.agentId, enabled: true });
    expect((await state()).paused).to.equal(false);
    const res = await pay({ to: payee, asset: 'USDC', amount: '1' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(1_000_000n);
  });

  it("rotates the lane key: the account accepts only the new key, and the old key's calls revert", async () => {
    const old = await laneKey();
    const rotated = await signed('agent', 'rotate-lane-key', agent.agentId);
    expect(rotated.previous_lane_address).to.equal(old.address);
    const fresh = await laneKey();
    expect(rotated.lane_address).to.equal(fresh.address);
    expect(fresh.address).to.not.equal(old.address);
    expect((await state()).lane).to.equal(fresh.address);
    expect(await laneRevert(old, laneCall.pay(s.token, payee, 1_000_000n))).to.be.oneOf(['InvalidLaneSignature', 'NotLane']);
    // The server's payments now go through the new key.
    const res = await pay({ to: payee, asset: 'USDC', amount: '2' });
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(3_000_000n);
  });
});
