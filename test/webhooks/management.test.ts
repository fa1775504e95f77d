// Endpoint management rules (spec 2.2, 3.1, 4.2-4.4): cap, event types, URL checks, PATCH, delete, listings.
import { expect } from 'chai';
import type { WebhookCaller } from '../../src/services/webhook.service.js';
import { createWebhookTestContext, type WebhookTestContext } from './helpers/context.js';
import { HOSTILE_URLS } from './hostile-urls.js';
import { refusal } from '../support/refusals.js';

describe('webhook endpoint management', () => {
  let ctx: WebhookTestContext;
  const url = 'https://hooks.example.com/agent-events';

  before(async () => {
    ctx = await createWebhookTestContext();
  });
  after(() => ctx.close());

  const create = (caller: WebhookCaller, extra: Record<string, unknown> = {}) => ctx.service.create(ctx.db, caller, { url, event_types: ['payment.executed'], ...extra } as never);

  describe('createWebhook', () => {
    it('returns the endpoint with the spec defaults and a whsec_ secret once', async () => {
      const caller = await ctx.newAgent();
      const { webhook, signing_secret } = await create(caller, { description: 'ops' });
      expect(signing_secret).to.match(/^whsec_[A-Za-z0-9_-]{43,}$/);
      expect(webhook).to.include({ url, description: 'ops', enabled: true, disabled_reason: null, consecutive_failures: 0, last_delivered_at: null, last_failure_at: null });
      expect(webhook.event_types).to.deep.equal(['payment.executed']);
      expect(webhook).not.to.have.property('signing_secret');
      const again = await ctx.service.get(ctx.db, caller, webhook.id);
      expect(JSON.stringify(again)).not.to.include(signing_secret);
      expect(again.description).to.equal('ops');
      expect((await create(caller)).webhook.description).to.equal('');
    });

    it('refuses the 11th endpoint with limit_exceeded, also under concurrency', async () => {
      const caller = await ctx.newAgent();
      const results = await Promise.allSettled(Array.from({ length: 12 }, () => create(caller)));
      expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(10);
      const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
      expect(rejected).to.have.length(2);
      for (const r of rejected) expect(r.reason).to.include({ code: 'limit_exceeded', status: 403 });
      expect((await ctx.service.list(ctx.db, caller, {})).items).to.have.length(10);
    });

    it('refuses reserved, unknown and empty event types with validation_failed', async () => {
      const caller = await ctx.newAgent();
      for (const eventTypes of [['payment.submitted'], ['agent.disabled'], ['nope.nope'], [], 'payment.executed']) {
        const err = await refusal(create(caller, { event_types: eventTypes }));
        expect(err.code, JSON.stringify(eventTypes)).to.equal('validation_failed');
      }
      const ok = await create(caller, { event_types: ['trusted_destination.confirmed', 'webhook.test', 'agent.webhook_disabled'] });
      expect(ok.webhook.event_types).to.have.length(3);
    });

    // A name that does not resolve is accepted at creation (delivery resolves and checks again): see test/audit/ssrf.test.ts.
    const refusedAtCreate = HOSTILE_URLS.filter((u) => u !== 'https://nxdomain.example.net/hook');

    it(`refuses every one of the ${refusedAtCreate.length} hostile URLs with validation_failed`, async () => {
      const caller = await ctx.newAgent();
      for (const hostile of refusedAtCreate) {
        const err = await refusal(ctx.strictService.create(ctx.db, caller, { url: hostile, event_types: ['payment.executed'] }));
        expect(err.code, hostile).to.equal('validation_failed');
        expect(err.details).to.include({ field: 'url' });
      }
      expect((await ctx.service.list(ctx.db, caller, {})).items).to.have.length(0);
    });
  });

  describe('updateWebhook', () => {
    it('needs at least one field and validates what it gets', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await create(caller);
      expect((await refusal(ctx.service.update(ctx.db, caller, webhook.id, {}))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.update(ctx.db, caller, webhook.id, { url: 'https://10.0.0.1/x' }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.update(ctx.db, caller, webhook.id, { event_types: ['deposit.received'] }))).code).to.equal('validation_failed');
      const updated = await ctx.service.update(ctx.db, caller, webhook.id, { url: 'https://partner.example.org/x', event_types: ['conversion.executed'], description: 'new' });
      expect(updated).to.include({ url: 'https://partner.example.org/x', description: 'new' });
      expect(updated.event_types).to.deep.equal(['conversion.executed']);
    });

    it('lets the caller disable and re-enable freely while disabled_reason is null', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await create(caller);
      expect(await ctx.service.update(ctx.db, caller, webhook.id, { enabled: false })).to.include({ enabled: false, disabled_reason: null });
      expect(await ctx.service.update(ctx.db, caller, webhook.id, { enabled: true })).to.include({ enabled: true, disabled_reason: null });
    });

    it('answers owner_only_action to re-enable or rotate an endpoint disabled for sustained failures', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await create(caller);
      await ctx.db('webhook_endpoints').where({ id: webhook.id }).update({ enabled: false, disabled_reason: 'sustained_failures', consecutive_failures: 12 });
      expect((await refusal(ctx.service.update(ctx.db, caller, webhook.id, { enabled: true }))).code).to.equal('owner_only_action');
      expect((await refusal(ctx.service.rotateSecret(ctx.db, caller, webhook.id))).code).to.equal('owner_only_action');
      expect(await ctx.service.get(ctx.db, caller, webhook.id)).to.include({ enabled: false, disabled_reason: 'sustained_failures' });
      expect(await ctx.service.enableByOwner(ctx.db, webhook.id)).to.include({ enabled: true, disabled_reason: null, consecutive_failures: 0 });
    });
  });

  describe('getWebhook / deleteWebhook', () => {
    it('hides other agents endpoints and deletes with their deliveries', async () => {
      const caller = await ctx.newAgent();
      const stranger = await ctx.newAgent();
      const { webhook } = await create(caller);
      expect((await refusal(ctx.service.get(ctx.db, stranger, webhook.id))).code).to.equal('not_found');
      expect((await refusal(ctx.service.remove(ctx.db, stranger, webhook.id))).code).to.equal('not_found');
      expect((await refusal(ctx.service.get(ctx.db, caller, 'not-a-uuid'))).code).to.equal('not_found');
      await ctx.emit(caller);
      expect(await ctx.deliveriesOf(webhook.id)).to.have.length(1);
      await ctx.service.remove(ctx.db, caller, webhook.id);
      expect((await refusal(ctx.service.get(ctx.db, caller, webhook.id))).code).to.equal('not_found');
      expect(await ctx.deliveriesOf(webhook.id)).to.have.length(0);
    });

    it('adds the last 10 delivery records with include=recent_deliveries', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await create(caller);
      const events = [];
      for (let i = 0; i < 12; i++) {
        events.push(await ctx.emit(caller));
        ctx.clock.advance(1000);
      }
      const plain = await ctx.service.get(ctx.db, caller, webhook.id);
      expect(plain).not.to.have.property('recent_deliveries');
      const full = await ctx.service.get(ctx.db, caller, webhook.id, { includeRecentDeliveries: true });
      expect(full.recent_deliveries!.map((d) => d.event_id)).to.deep.equal(
        events
          .slice(2)
          .reverse()
          .map((e) => e.id),
      );
    });
  });

  describe('listWebhooks', () => {
    it('pages newest first with an exclusive cursor', async () => {
      const caller = await ctx.newAgent();
      const ids = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await create(caller)).webhook.id);
        ctx.clock.advance(1000);
      }
      const first = await ctx.service.list(ctx.db, caller, { limit: 2 });
      expect(first.items.map((w) => w.id)).to.deep.equal([ids[4], ids[3]]);
      expect(first).to.include({ has_more: true, next_cursor: ids[3] });
      const second = await ctx.service.list(ctx.db, caller, { limit: 2, cursor: first.next_cursor! });
      const third = await ctx.service.list(ctx.db, caller, { limit: 2, cursor: second.next_cursor! });
      expect([...second.items, ...third.items].map((w) => w.id)).to.deep.equal([ids[2], ids[1], ids[0]]);
      expect(third).to.include({ has_more: false, next_cursor: null });
      expect((await refusal(ctx.service.list(ctx.db, caller, { limit: 101 }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.list(ctx.db, await ctx.newAgent(), { cursor: ids[0] }))).code).to.equal('validation_failed');
    });
  });

  describe('listWebhookDeliveries', () => {
    it('pages newest first and filters by status and event_id, binding the cursor to endpoint and filters', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await create(caller);
      const other = await create(caller);
      const events = [];
      for (let i = 0; i < 7; i++) {
        events.push(await ctx.emit(caller));
        ctx.clock.advance(1000);
      }
      // Mark three as delivered directly: listing is what is under test here.
      await ctx.db('webhook_deliveries').where({ endpoint_id: webhook.id }).whereIn('event_id', [events[0]!.id, events[3]!.id, events[5]!.id]).update({ status: 'delivered' });

      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 5; page++) {
        const result = await ctx.service.listDeliveries(ctx.db, caller, webhook.id, { limit: 3, cursor });
        seen.push(...result.items.map((d) => d.event_id));
        if (!result.has_more) {
          expect(result.next_cursor).to.equal(null);
          break;
        }
        cursor = result.next_cursor!;
        expect(cursor).to.equal(result.items[2]!.id);
      }
      expect(seen).to.deep.equal(events.map((e) => e.id).reverse());

      const delivered = await ctx.service.listDeliveries(ctx.db, caller, webhook.id, { status: 'delivered', limit: 2 });
      expect(delivered.items.map((d) => d.event_id)).to.deep.equal([events[5]!.id, events[3]!.id]);
      const rest = await ctx.service.listDeliveries(ctx.db, caller, webhook.id, { status: 'delivered', limit: 2, cursor: delivered.next_cursor! });
      expect(rest.items.map((d) => d.event_id)).to.deep.equal([events[0]!.id]);
      const pending = await ctx.service.listDeliveries(ctx.db, caller, webhook.id, { status: 'pending' });
      expect(pending.items).to.have.length(4);
      const one = await ctx.service.listDeliveries(ctx.db, caller, webhook.id, { event_id: events[2]!.id });
      expect(one.items.map((d) => d.event_id)).to.deep.equal([events[2]!.id]);
      expect(one.items[0]).to.include({ endpoint_id: webhook.id, event_type: 'payment.executed', attempt: 0, latency_ms: 0, response_body: '', first_attempt_at: null });

      const foreignCursor = (await ctx.service.listDeliveries(ctx.db, caller, other.webhook.id, { limit: 1 })).items[0]!.id;
      expect((await refusal(ctx.service.listDeliveries(ctx.db, caller, webhook.id, { cursor: foreignCursor }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.listDeliveries(ctx.db, caller, webhook.id, { cursor: one.items[0]!.id, event_id: events[1]!.id }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.listDeliveries(ctx.db, caller, webhook.id, { cursor: 'garbage' }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.listDeliveries(ctx.db, caller, webhook.id, { status: 'exploded' }))).code).to.equal('validation_failed');
      expect((await refusal(ctx.service.listDeliveries(ctx.db, await ctx.newAgent(), webhook.id, {}))).code).to.equal('not_found');
    });
  });
});
