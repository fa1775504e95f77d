// Issue 24: a one-off payment in evm mode is a cheque the account issues (unlock and expiry on chain). After its unlock
// time the claim is relayed to the account (claimCheque) and the funds move on chain to the payee, exactly once; before
// it the API and the chain both refuse. The owner's cancel before unlock is test/custody/owner-flows.test.ts.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { getAddress, parseUnits } from 'viem';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';

const ADMIN = 'cheque-claim-admin-token-0123456789abcdef0123';
const admin = { authorization: `Bearer ${ADMIN}` };

describe('custody: a one-off payment is claimed on chain after its unlock (issue 24)', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let agent: ChainAgent;
  // Real time plus an offset the test moves forward with the chain's time (the settlement loop needs time to pass).
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { clock, env: { ADMIN_TOKEN: ADMIN } });
    agent = await s.agent({ USDC: '100' });
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const cheque = (account: Address, id: string) =>
    node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'cheque', args: [id as `0x${string}`] }) as Promise<{ status: number; amount: bigint; to: string }>;
  const claim = (id: string) => s.request('POST', `/v1/admin/one-off-payments/${id}/claim`, { headers: admin, idempotencyKey: randomUUID() });

  it('refuses the claim before unlock (API and chain), then moves the funds once on chain', async () => {
    const to = getAddress(randomAddress()) as Address;
    const res = await s.request('POST', '/v1/agent/one-off-payments', {
      agent,
      idempotencyKey: randomUUID(),
      body: { to, asset: 'USDC', amount: '5', unlock_delay_seconds: 600, expires_in_seconds: 7200 },
    });
    expect(res.status, res.text).to.equal(200);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status).to.equal('executed');
    const row = await s.db('one_off_payments').where({ operation_id: op!.id }).first();
    expect(row.cheque_id).to.match(/^0x[0-9a-f]{64}$/);
    expect(await cheque(agent.address, row.cheque_id)).to.include({ status: 1, amount: 5_000_000n, to }); // pending

    const early = await claim(row.id);
    expect(early.status, early.text).to.equal(409);
    expect(early.body.error.code).to.equal('time_delay_not_reached');
    // The chain refuses too: anyone may submit claimCheque, but not before unlockAt.
    const onChain = await node.client.simulateContract({ account: node.devWallet(2).account, address: agent.address, abi: agentAccountAbi, functionName: 'claimCheque', args: [row.cheque_id] }).then(
      () => 'accepted',
      () => 'reverted',
    );
    expect(onChain, 'claimCheque before unlock').to.equal('reverted');
    expect(await s.usdcBalance(to)).to.equal(0n);

    // Past the unlock, on chain and on the server's clock.
    await node.client.request({ method: 'evm_increaseTime' as never, params: [700] as never });
    await node.mine(1);
    offsetMs += 700_000;
    const claimed = await claim(row.id);
    expect(claimed.status, claimed.text).to.equal(200);
    expect(claimed.body).to.include({ one_off_payment_id: row.id, status: 'claimed' });
    expect((await cheque(agent.address, row.cheque_id)).status).to.equal(2); // claimed
    expect(await s.usdcBalance(to)).to.equal(5_000_000n);
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('95', 6));
    const balance = await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
    expect(balance.available + balance.held).to.equal(parseUnits('95', 6));

    // Once: a second claim is refused and moves nothing.
    const again = await claim(row.id);
    expect(again.status).to.equal(409);
    expect(await s.usdcBalance(to)).to.equal(5_000_000n);
  });
});
