// Audit E: defects of the money core (ledger, operations, policy, payments, settlement, idempotency) shown against real Postgres.
import { expect } from 'chai';
import { createIdempotency } from '../../src/idempotency/idempotency.js';
import { createSealer } from '../../src/lib/crypto.js';
import { ApiError } from '../../src/lib/errors.js';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import { addr, assertBooksBalance, createLedgerFixture, makeAgent, MASTER_KEY, rejectingRefusals, settleAll, type LedgerFixture } from '../ledger/factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);

describe('audit: money core', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  describe('idempotency.run', () => {
    const sealer = createSealer(MASTER_KEY);
    it("holds the key from its claim: a record of the same key written meanwhile waits, then fails, and the run's response is stored", async () => {
      // The claim inserts the record (placeholder response) in the statement that takes the lock, so no other
      // response of the key can commit between the look and the store (the race the old look-then-upsert had to undo).
      const agent = await makeAgent(f);
      const idem = createIdempotency({ db: f.db, clock: f.clock, sealer });
      const key = `race-${Date.now()}`;
      let competing: Promise<unknown> | undefined;
      let competingSettled = false;
      const outcome = await idem.run({ agentId: agent.agentId, key, fingerprint: 'fp-1', operationId: 'createPayment' }, async () => {
        const now = f.clock.now();
        competing = f
          .db('idempotency_keys')
          .insert({
            agent_id: agent.agentId,
            key,
            fingerprint: 'fp-1',
            operation_id: 'createPayment',
            status_code: 200,
            sealed_response: sealer.seal(JSON.stringify({ ok: true, first: true })),
            response_headers: '{}',
            created_at: now,
            expires_at: new Date(now.getTime() + 86_400_000),
          })
          .finally(() => {
            competingSettled = true;
          });
        competing.catch(() => {});
        await new Promise((r) => setTimeout(r, 200));
        expect(competingSettled, 'the competing insert waits for the claim').to.equal(false);
        return { status: 200, body: { ok: true, first: false } };
      });
      expect(outcome.replayed).to.equal(false);
      const err = await competing!.then(
        () => null,
        (e: unknown) => e,
      );
      expect((err as { code?: string } | null)?.code).to.equal('23505');
      const stored = await f.db('idempotency_keys').where({ agent_id: agent.agentId, key }).first();
      expect(JSON.parse(sealer.open(stored.sealed_response))).to.deep.equal({ ok: true, first: false });
    });

    it('reuses a key whose record has expired', async () => {
      const agent = await makeAgent(f);
      const idem = createIdempotency({ db: f.db, clock: f.clock, sealer });
      const key = `expired-${Date.now()}`;
      const first = await idem.run({ agentId: agent.agentId, key, fingerprint: 'a', operationId: 'createPayment' }, async () => ({ status: 200, body: { ok: true, n: 1 } }));
      expect(first.replayed).to.equal(false);
      f.clock.advance(86_400_001);
      const second = await idem.run({ agentId: agent.agentId, key, fingerprint: 'b', operationId: 'createPayment' }, async () => ({ status: 200, body: { ok: true, n: 2 } }));
      expect(second).to.deep.include({ replayed: false });
      const stored = await f.db('idempotency_keys').where({ agent_id: agent.agentId, key }).first();
      expect(JSON.parse(sealer.open(stored.sealed_response))).to.deep.equal({ ok: true, n: 2 });
    });
  });

  describe('policy caps', () => {
    it('refuses limit_exceeded when an asset amount is worth a fraction of a USD base unit over per_tx_usd', async () => {
      const agent = await makeAgent(f, { policy: { operation_types: 'all', per_tx_usd: '3000', allowed_recipients: 'all' }, fund: { ETH: '2' } });
      // 1 ETH + 1 wei at 3000 USD is 3000.000000000000003 USD: over the cap, not equal to it.
      const err = await f.area.payments.createPayment(f.db, agent, { to: addr(0x3001), asset: 'ETH', amount: '1.000000000000000001' }, null).catch((e: unknown) => e);
      expect(codeOf(err)).to.equal('limit_exceeded');
      const ok = await f.area.payments.createPayment(f.db, agent, { to: addr(0x3001), asset: 'ETH', amount: '1' }, null);
      expect(ok.status).to.equal('accepted');
    });

    it('counts dust payments toward per_period_usd instead of valuing them at zero', async () => {
      const agent = await makeAgent(f, { policy: { operation_types: 'all', per_period_usd: '0.00000002', allowed_recipients: 'all' }, fund: { ETH: '1' } });
      const dust = { to: addr(0x3002), asset: 'ETH', amount: '0.000000000000000001' };
      await f.area.payments.createPayment(f.db, agent, dust, null);
      await f.area.payments.createPayment(f.db, agent, dust, null);
      expect(codeOf(await f.area.payments.createPayment(f.db, agent, dust, null).catch((e: unknown) => e))).to.equal('limit_exceeded');
    });
  });

  describe('settleDue', () => {
    it('settles the other due operations and expires one-off payments when one settler crashes', async () => {
      const g = await createLedgerFixture();
      try {
        g.area.operations.registerSettler('audit.crash', async () => {
          throw new Error('settler bug');
        });
        const agent = await makeAgent(g, { fund: { USDC: '10' } });
        const crash = await rejectingRefusals(g.area.operations).create(g.db, { principal: agent, type: 'audit.crash', humanMessage: 'crashes in settlement', skipPolicy: true });
        const pay = await g.area.payments.createPayment(g.db, agent, { to: addr(0x4001), asset: 'USDC', amount: '1' }, null);
        const oneOff = await g.area.payments.createOneOffPayment(g.db, agent, { to: addr(0x4002), asset: 'USDC', amount: '2', expires_in_seconds: 60 }, null);
        g.clock.advance(61_000);
        for (let i = 0; i < 5; i++) await runSettlementTick({ db: g.db, ledger: g.area });
        expect((await g.area.operations.get(g.db, agent.agentId, pay.operation_id)).status).to.equal('executed');
        expect((await g.db('one_off_payments').where({ id: oneOff.resource.id }).first()).status).to.equal('expired');
        expect((await g.area.operations.get(g.db, agent.agentId, crash.operation.id)).status).to.equal('submitted');
        expect(await g.area.ledger.balance(g.db, agent.walletId, 'USDC')).to.deep.equal({ available: 9_000_000n, held: 0n });
        await assertBooksBalance(g.db, [agent.walletId]);
        // A crashing operation does not keep the loop busy: the pass goes idle.
        expect(await runSettlementTick({ db: g.db, ledger: g.area })).to.equal(0);
        await g.db('operations').where({ id: crash.operation.id }).update({ status: 'cancelled' });
      } finally {
        await g.close();
      }
    });

    it('settles payments between agents paying each other with two workers without a deadlock', async function () {
      this.timeout(60_000);
      const g = await createLedgerFixture();
      const h = await createLedgerFixture();
      try {
        h.clock.set(g.clock.now());
        const agents = await Promise.all(Array.from({ length: 6 }, () => makeAgent(g, { fund: { USDC: '100', EURC: '100' } })));
        const wallets = await g
          .db('wallets')
          .whereIn(
            'id',
            agents.map((a) => a.walletId),
          )
          .select('id', 'address');
        const addressOf = (walletId: string) => wallets.find((w) => w.id === walletId)!.address as string;
        const ids: string[] = [];
        for (let i = 0; i < 180; i++) {
          const from = agents[i % 6]!;
          const to = agents[(i * 7 + 1 + Math.floor(i / 6)) % 6]!;
          if (to === from) continue;
          ids.push((await g.area.payments.createPayment(g.db, from, { to: addressOf(to.walletId), asset: i % 2 ? 'USDC' : 'EURC', amount: '0.1' }, null)).operation_id);
        }
        const errors: unknown[] = [];
        const run = async (x: LedgerFixture) => {
          for (let i = 0; i < 200; i++) {
            try {
              if ((await x.area.operations.settleDue(x.db, { limit: 20 })) === 0) return;
            } catch (err) {
              errors.push(err);
            }
          }
        };
        await Promise.all([run(g), run(h)]);
        await settleAll(g);
        expect(errors.map((e) => String(e))).to.deep.equal([]);
        const left = await g.db('operations').whereIn('id', ids).whereNot('status', 'executed').count('* as n').first();
        expect(Number(left?.n)).to.equal(0);
        await assertBooksBalance(
          g.db,
          agents.map((a) => a.walletId),
        );
      } finally {
        await h.close();
        await g.close();
      }
    });
  });
});
