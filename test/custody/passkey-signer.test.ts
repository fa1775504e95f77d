// Issue 27 on Anvil through the owner API: an agent account handed to the owner's passkey. POST …/account/owner
// answers 428 with TransferOwnership to the passkey's PasskeyOwner, signed by the current owner's key (here, and with
// agentctl --owner-key-file); from then on the account view says the owner is a passkey, and owner changes (pause,
// resume, policy) and an approval above the threshold are signed by WebAuthn assertions over their EIP-712 digests,
// made by a software P-256 key, checked by the server through ERC-1271 and by the account on chain. Another passkey's
// assertion, or the old key's signature, is refused by the server and would revert on chain.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { passkeyOwnerFactoryAbi } from '../../contracts/artifacts/PasskeyOwnerFactory.js';
import { accountRevertOf, ownerActionCallData, readAccountState } from '../../src/chain/accounts.js';
import { agentAccountAbi, findCustodyContracts } from '../../src/chain/custody.js';
import type { Address } from '../../src/chain/port.js';
import { signProposal, withOwnerSignature } from '../../src/cli/owner-keys.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { agentctlWith } from '../helpers/agentctl.js';
import { chainEnv, randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import { testConfigEnv, type TestAgent } from '../helpers/server.js';
import { signProposalWithPasskey } from '../support/passkey-signer.js';
import { createSoftAuthenticator, type SoftAuthenticator } from '../support/webauthn.js';

describe('ownerSetAccountOwner: an agent account owned by a passkey (issue 27)', function () {
  this.timeout(240_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let dir: string;
  let owner: PrivateKeyAccount;
  let ownerId: string;
  let auth: Record<string, string>;
  let agent: TestAgent;
  let account: Address;
  let passkey: SoftAuthenticator;
  let passkeyId: string;
  let other: SoftAuthenticator;
  let otherId: string;
  let passkeySigner: Address;
  const payee = randomAddress();

  const call = (method: string, p: string, body?: unknown) => s.request(method, p, { headers: auth, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
  const register = async (name: string): Promise<[SoftAuthenticator, string]> => {
    const base = new URL(s.baseUrl);
    const key = createSoftAuthenticator(base.hostname, base.origin);
    const opts = await call('POST', '/v1/owner/passkeys/registration-options');
    expect(opts.status, opts.text).to.equal(200);
    const reg = await call('POST', '/v1/owner/passkeys', { name, response: key.register(opts.body.options) });
    expect(reg.status, reg.text).to.equal(201);
    return [key, reg.body.passkey.id as string];
  };
  /** The route without a signature (its 428 proposal), then with the passkey's assertion over the proposal's digest. */
  const signedByPasskey = async (key: SoftAuthenticator, method: string, p: string, body: Record<string, unknown> = {}) => {
    const unsigned = await call(method, p, body);
    expect(unsigned.status, unsigned.text).to.equal(428);
    const proposal = unsigned.body.error.details;
    expect(proposal.signer).to.equal(passkeySigner);
    return call(method, p, { ...body, owner_signature: signProposalWithPasskey(key, proposal) });
  };
  const POLICY = { operation_types: 'all', allowed_assets: ['USDC'], allowed_recipients: [payee], per_period_usd: '5000', approval_threshold_usd: '100' };

  before(async () => {
    node = await startAnvil();
    dir = mkdtempSync(path.join(tmpdir(), 'passkey-signer-'));
    s = await startChainServer(node, { env: { DATA_DIR: dir } });
    const ownerKey = generatePrivateKey();
    owner = privateKeyToAccount(ownerKey);
    writeFileSync(path.join(dir, 'owner.key'), `${ownerKey}\n`, { mode: 0o600 });
    ownerId = (await s.services.agents.createOwner(s.db, { email: `passkey-signer-${randomUUID()}@example.com`, signerAddress: owner.address })).owner_id;
    auth = { authorization: `Bearer ${(await s.services.owner.createToken(s.db, ownerId)).token}` };
    agent = await s.createAgent({ ownerId });
    account = getAddress((await s.db('wallets').where({ id: agent.walletId }).first()).address) as Address;
    await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, agent.agentId, POLICY, sig));
    await mintAndCredit(s, agent.walletId, account, '1000');
    [passkey, passkeyId] = await register('laptop');
    [other, otherId] = await register('phone');
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("answers 428 with TransferOwnership to the passkey's signer; signed by the owner's key, the passkey owns the account", async () => {
    const factory = (await findCustodyContracts(s.db, 31337))!.passkeyOwnerFactory!;
    passkeySigner = getAddress(
      await node.client.readContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'predict', args: [passkey.publicKey.qx, passkey.publicKey.qy] }),
    ) as Address;
    const unsigned = await call('POST', `/v1/owner/agents/${agent.agentId}/account/owner`, { passkey_id: passkeyId });
    expect(unsigned.status, unsigned.text).to.equal(428);
    const proposal = unsigned.body.error.details;
    expect(proposal).to.include({ account, signer: owner.address });
    expect(proposal.typed_data.primaryType).to.equal('TransferOwnership');
    expect(proposal.typed_data.message.newOwner).to.equal(passkeySigner);
    // Nothing deployed for an unsigned proposal.
    expect((await node.client.getCode({ address: passkeySigner })) ?? '0x').to.equal('0x');
    // A signature of another key is refused; nothing moves.
    const stranger = privateKeyToAccount(generatePrivateKey());
    const forged = await call('POST', `/v1/owner/agents/${agent.agentId}/account/owner`, {
      passkey_id: passkeyId,
      owner_signature: await signProposal(stranger, { ...proposal, signer: stranger.address }),
    });
    expect(forged.status, forged.text).to.equal(400);
    expect((await readAccountState(node.client, account)).owner).to.equal(owner.address);

    const signed = await call('POST', `/v1/owner/agents/${agent.agentId}/account/owner`, { passkey_id: passkeyId, owner_signature: await signProposal(owner, proposal) });
    expect(signed.status, signed.text).to.equal(200);
    expect(signed.body).to.include({ agent_id: agent.agentId, owner_signer: passkeySigner, owner_signer_kind: 'passkey', owner_passkey_id: passkeyId });
    expect((await readAccountState(node.client, account)).owner).to.equal(passkeySigner);
    expect(((await node.client.getCode({ address: passkeySigner })) ?? '0x').length).to.be.greaterThan(2);

    const view = await call('GET', `/v1/owner/agents/${agent.agentId}/account`);
    expect(view.status, view.text).to.equal(200);
    expect(view.body).to.include({ owner_signer: passkeySigner, owner_signer_kind: 'passkey' });
    expect(view.body.owner_passkey).to.deep.equal({ id: passkeyId, credential_id: passkey.credentialId, name: 'laptop' });
    expect(view.body.commands).to.deep.equal([]);
    // Handing it to the same passkey again is refused.
    const again = await call('POST', `/v1/owner/agents/${agent.agentId}/account/owner`, { passkey_id: passkeyId });
    expect(again.status, again.text).to.equal(409);
  });

  it('pauses and resumes with the passkey: the account on chain follows', async () => {
    const paused = await signedByPasskey(passkey, 'POST', `/v1/owner/agents/${agent.agentId}/disable`);
    expect(paused.status, paused.text).to.equal(200);
    expect(await node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(true);
    const resumed = await signedByPasskey(passkey, 'POST', `/v1/owner/agents/${agent.agentId}/enable`);
    expect(resumed.status, resumed.text).to.equal(200);
    expect(await node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(false);
  });

  it("refuses another passkey's assertion and the old key's signature; the account would revert them too", async () => {
    const unsigned = await call('POST', `/v1/owner/agents/${agent.agentId}/disable`, {});
    expect(unsigned.status, unsigned.text).to.equal(428);
    const proposal = unsigned.body.error.details;
    const foreign = signProposalWithPasskey(other, proposal);
    const byOther = await call('POST', `/v1/owner/agents/${agent.agentId}/disable`, { owner_signature: foreign });
    expect(byOther.status, byOther.text).to.equal(400);
    expect(byOther.body.error.code).to.equal('validation_failed');
    const byOldKey = await call('POST', `/v1/owner/agents/${agent.agentId}/disable`, { owner_signature: await signProposal(owner, { ...proposal, signer: owner.address }) });
    expect(byOldKey.status, byOldKey.text).to.equal(400);
    // On chain, submitted by anyone: the account refuses the other passkey's assertion.
    const data = ownerActionCallData({ kind: 'pause' }, { signature: foreign.signature, nonce: BigInt(foreign.nonce), deadline: BigInt(foreign.deadline) });
    const reverted = await node.client.call({ to: account, data, account: node.devWallet(1).account.address }).then(
      () => 'passed',
      (err: unknown) => accountRevertOf(err)?.name,
    );
    expect(reverted).to.equal('InvalidOwnerSignature');
    // The other passkey cannot take the account over either (its owner is the passkey now, not the key).
    const takeover = await call('POST', `/v1/owner/agents/${agent.agentId}/account/owner`, { passkey_id: otherId });
    expect(takeover.status, takeover.text).to.equal(428);
    expect(takeover.body.error.details.signer).to.equal(passkeySigner);
    expect(await node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(false);
  });

  it('changes the policy with the passkey: the policy version moves on chain', async () => {
    const before = (await readAccountState(node.client, account)).policyVersion;
    const res = await signedByPasskey(passkey, 'PUT', `/v1/owner/agents/${agent.agentId}/policy`, { ...POLICY, per_tx_usd: '500' });
    expect(res.status, res.text).to.equal(200);
    const state = await readAccountState(node.client, account);
    expect(state.policyVersion).to.equal(before + 1n);
    expect(state.limits!.perTxUsd).to.equal(500n * 10n ** 8n);
  });

  it('approves a payment above the threshold with the passkey (ApproveSpend) and it settles on chain', async () => {
    const paid = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to: payee, asset: 'USDC', amount: '300' } });
    expect(paid.status, paid.text).to.equal(200);
    expect(paid.body.approval).to.include({ state: 'pending' });
    const id = String(paid.body.operation_id);
    const approved = await signedByPasskey(passkey, 'POST', `/v1/owner/approvals/${id}/approve`);
    expect(approved.status, approved.text).to.equal(200);
    expect(approved.body.operation.approval).to.include({ state: 'approved' });
    const [op] = await s.settle([id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(300_000_000n);
  });

  it('agentctl agent hand-to-passkey signs the transfer with --owner-key-file (unsigned: 428)', async () => {
    const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { DATA_DIR: dir })) }), 120_000);
    const second = await s.createAgent({ ownerId });
    await withOwnerSignature(owner, (sig) => s.services.ledger.policy.set(s.db, second.agentId, POLICY, sig));
    const unsigned = await agentctl('agent', 'hand-to-passkey', second.agentId, '--passkey', passkeyId);
    expect(unsigned.code).to.equal(1);
    expect(unsigned.stderr).to.include('owner_signature_required');
    const out = await json('agent', 'hand-to-passkey', second.agentId, '--passkey', passkeyId, '--owner-key-file', path.join(dir, 'owner.key'));
    expect(out).to.include({ agent_id: second.agentId, owner_signer: passkeySigner, owner_signer_kind: 'passkey', owner_passkey_id: passkeyId });
    const secondAccount = getAddress((await s.db('wallets').where({ id: second.walletId }).first()).address) as Address;
    expect((await readAccountState(node.client, secondAccount)).owner).to.equal(passkeySigner);
  });
});
