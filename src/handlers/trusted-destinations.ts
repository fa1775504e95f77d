// Tag trusted-destinations: list and read; confirm (after the time lock), cancel (pending) and remove (confirmed).
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import { ok, who } from './ledger-common.js';

export const listTrustedDestinations: Handler<'listTrustedDestinations'> = async (req, ctx) => ok(await ctx.services.ledger.destinations.list(ctx.db, ctx.principal.agentId, req.query));

export const getTrustedDestination: Handler<'getTrustedDestination'> = async (req, ctx) =>
  ok({ trusted_destination: await ctx.services.ledger.destinations.get(ctx.db, ctx.principal.agentId, req.params.id) });

export const confirmTrustedDestination: Handler<'confirmTrustedDestination'> = async (req, ctx) =>
  answer(await ctx.services.ledger.destinations.act(ctx.db, who(ctx), req.params.id, 'confirm', { idempotencyKey: ctx.idempotencyKey }));

export const cancelTrustedDestination: Handler<'cancelTrustedDestination'> = async (req, ctx) =>
  answer(await ctx.services.ledger.destinations.act(ctx.db, who(ctx), req.params.id, 'cancel', { idempotencyKey: ctx.idempotencyKey }));

export const deleteTrustedDestination: Handler<'deleteTrustedDestination'> = async (req, ctx) =>
  answer(await ctx.services.ledger.destinations.act(ctx.db, who(ctx), req.params.id, 'remove', { idempotencyKey: ctx.idempotencyKey }));
