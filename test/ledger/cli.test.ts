import { expect } from 'chai';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ledgerCommands } from '../../src/cli/ledger.js';
import type { CliContext } from '../../src/cli/types.js';
import { addr, createLedgerFixture, makeAgent, settleAll, type LedgerFixture } from './factory.js';

describe('agentctl ledger commands', () => {
  let f: LedgerFixture;
  let ctx: CliContext;
  const run = (line: string, flags: Record<string, string | boolean> = {}) => {
    const words = line.split(' ');
    const command = ledgerCommands.filter((c) => c.name.split(' ').every((w, i) => words[i] === w)).sort((a, b) => b.name.length - a.name.length)[0]!;
    return command.run(ctx, { positional: words.slice(command.name.split(' ').length), flags });
  };
  before(async () => {
    f = await createLedgerFixture();
    ctx = { db: f.db, services: { ledger: f.area, agents: f.agents } as never, config: {} as never, clock: f.clock };
  });
  after(async () => f.close());

  it('funds a wallet, sets a policy from a file, and allows everything with --all', async () => {
    const agent = await makeAgent(f, { policy: null });
    expect(await run(`wallet fund ${agent.agentId}`, { asset: 'USDC', amount: '12.5' })).to.include({ amount: '12.5', available: '12.5' });
    const file = join(tmpdir(), `policy-${agent.agentId}.json`);
    await writeFile(file, JSON.stringify({ operation_types: ['payment'], per_tx_usd: '5', allowed_assets: ['USDC'] }));
    const set = await run(`agent set-policy ${agent.agentId}`, { file });
    expect(set.policy).to.include({ per_tx_usd: '5' });
    expect((await f.area.policy.limits(f.db, agent.agentId)).limits).to.include({ per_tx_usd: '5', lifetime_usd: null });
    await run(`agent allow ${agent.agentId}`, { all: true });
    expect((await f.area.policy.limits(f.db, agent.agentId)).limits.operation_types).to.equal('all');
    await writeFile(file, JSON.stringify({ operation_types: 'all', per_tx_usd: 5 }));
    expect(await run(`agent set-policy ${agent.agentId}`, { file }).catch((e: Error) => e.message)).to.include('per_tx_usd');
  });

  it('adds recipients, recurring payments, destinations and withdrawal methods, and drives one-offs and the chain', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    const { recipient_id } = (await run(`recipient add ${agent.agentId}`, { kind: 'recurring', name: 'Bob', address: addr(0xb0b) })) as { recipient_id: string };
    expect(await run(`recurring add ${agent.agentId}`, { recipient: recipient_id, asset: 'USDC', amount: '1', interval: 'month' })).to.have.property('recurring_payment_id');
    const { destination_id } = (await run(`destination add ${agent.agentId}`, { kind: 'crypto', chain: 'base', address: addr(0xde), label: 'Cold', 'timelock-seconds': '0' })) as {
      destination_id: string;
    };
    expect(await run(`destination confirm ${destination_id}`)).to.include({ status: 'executed' });
    expect(await run(`withdrawal-method add ${agent.agentId}`, { kind: 'bank', label: 'Checking' })).to.have.property('method_id');
    const res = await f.area.payments.createOneOffPayment(f.db, agent, { to: addr(0xb0b), asset: 'USDC', amount: '2' }, null);
    expect(await run(`one-off claim ${res.resource.id}`)).to.include({ status: 'claimed' });
    expect(await run(`chain fail-address ${addr(0xfa11)}`)).to.deep.equal({ address: addr(0xfa11), failing: true });
    const failing = await f.area.payments.createPayment(f.db, agent, { to: addr(0xfa11), asset: 'USDC', amount: '1' }, null);
    await settleAll(f);
    expect((await f.area.operations.get(f.db, agent.agentId, failing.operation_id)).status).to.equal('execution_failed');
    expect(await run(`price set WETH 2000.5`, { at: '2026-03-02T09:30:00.000Z' })).to.deep.equal({ asset: 'WETH', price_usd: '2000.5', observed_at: '2026-03-02T09:30:00.000Z' });
    await run('price set WETH 3000');
  });
});
