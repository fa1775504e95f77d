// The "exactly one of amount and amount_usd" rule (contract §1) as the router answers it. The document spells it as a
// oneOf of two shapes (ByAmount / ByAmountUsd, each forbidding the other field) so that code generators keep it; both and
// neither answer one problem in words naming the two fields (issue 29), never Ajv's "must match exactly one schema".
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRouter } from '../../src/http/router.js';
import type { Router } from '../../src/http/types.js';

const document = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));
const uuid = '00000000-0000-4000-8000-000000000000';
const to = `0x${'1'.repeat(40)}`;

/** Every route whose body takes exactly one of amount and amount_usd, with the rest of a valid body. */
const ROUTES: [string, Record<string, unknown>][] = [
  ['/v1/agent/payments', { to, asset: 'USDC' }],
  ['/v1/agent/one-off-payments', { to, asset: 'USDC' }],
  ['/v1/agent/withdrawals/to-bank', { method_id: uuid, asset: 'USDC' }],
  ['/v1/agent/withdrawals/to-crypto', { destination_id: uuid, asset: 'USDC' }],
  ['/v1/agent/borrow', { asset: 'USDC' }],
  ['/v1/agent/borrow/collateral/add', { asset: 'WETH' }],
  ['/v1/agent/conversions/quote', { from_asset: 'USDC', to_asset: 'WETH' }],
  ['/v1/agent/earn/deposit', { asset: 'USDC', use_best_available: true }],
];

const ONE_OF = { location: 'body', path: '/', message: 'give exactly one of amount or amount_usd' };

async function answer(router: Router, path: string, body: Record<string, unknown>): Promise<{ code?: string; message?: string; details?: { errors?: unknown[]; field?: string; fields?: string[] } }> {
  try {
    await router.handle({ method: 'post', path, body, query: {}, headers: { 'content-type': 'application/json', 'idempotency-key': 'k' } } as never, { principal: { agentId: 'a' } } as never);
  } catch (e) {
    return e as { code?: string; message?: string; details?: { errors?: unknown[]; field?: string; fields?: string[] } };
  }
  throw new Error(`${path} answered without an error`);
}

describe('amount / amount_usd (exactly one)', () => {
  let router: Router;
  before(async () => {
    // No handlers: a body that passes validation reaches the 501 of a route without one.
    router = await createRouter({ document, handlers: {} });
  });

  it('models every either-or body as the two shapes ByAmount and ByAmountUsd', () => {
    for (const [path] of ROUTES) {
      const ref = document.paths[path].post.requestBody.content['application/json'].schema.$ref as string;
      const schema = document.components.schemas[ref.split('/').pop()!];
      const oneOfs = [schema.oneOf, ...((schema.allOf ?? []) as { oneOf?: unknown }[]).map((x) => x.oneOf)].filter(Boolean);
      expect(oneOfs, path).to.deep.include([{ $ref: '#/components/schemas/ByAmount' }, { $ref: '#/components/schemas/ByAmountUsd' }]);
    }
  });

  for (const [path, base] of ROUTES) {
    describe(path, () => {
      it('refuses both with the single oneOf problem', async () => {
        const err = await answer(router, path, { ...base, amount: '1', amount_usd: '1' });
        expect(err.code).to.equal('validation_failed');
        expect(err.message).to.equal('Request validation failed: give exactly one of amount or amount_usd');
        expect(err.details?.errors).to.deep.equal([ONE_OF]);
        expect(err.details).to.deep.include({ field: 'amount', fields: ['amount', 'amount_usd'] });
      });

      it('refuses neither with the same single problem naming both fields', async () => {
        const err = await answer(router, path, base);
        expect(err.code).to.equal('validation_failed');
        expect(err.message).to.equal('Request validation failed: give exactly one of amount or amount_usd');
        expect(err.details?.errors).to.deep.equal([ONE_OF]);
        expect(err.details).to.deep.include({ field: 'amount', fields: ['amount', 'amount_usd'] });
      });

      it('refuses both with a malformed amount naming the either-or and the type', async () => {
        const err = await answer(router, path, { ...base, amount: 1, amount_usd: '1' });
        expect(err.details?.errors).to.deep.equal([ONE_OF, { location: 'body', path: '/amount', message: 'must be a string' }]);
      });

      it('passes validation with either field alone', async () => {
        for (const amount of [{ amount: '1' }, { amount_usd: '1' }]) expect((await answer(router, path, { ...base, ...amount })).code, JSON.stringify(amount)).to.equal('not_implemented');
      });
    });
  }
});
