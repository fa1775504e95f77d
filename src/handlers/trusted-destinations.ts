// Tag trusted-destinations: list and read; confirm (after the time lock), cancel (pending) and remove (confirmed).
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { DestinationAction } from '../services/ledger/destinations.js';
import { ok, pageQuery, param, who } from './ledger-common.js';

const act = (action: DestinationAction): LooseHandler => async (c, ctx) => answer(await ctx.services.ledger.destinations.act(ctx.db, who(ctx), param(c, 'id'), action, { idempotencyKey: ctx.idempotencyKey }));

export const listTrustedDestinations: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.destinations.list(ctx.db, ctx.principal.agentId, pageQuery(c)));

export const getTrustedDestination: LooseHandler = async (c, ctx) => ok({ trusted_destination: await ctx.services.ledger.destinations.get(ctx.db, ctx.principal.agentId, param(c, 'id')) });

export const confirmTrustedDestination: LooseHandler = act('confirm');

export const cancelTrustedDestination: LooseHandler = act('cancel');

export const deleteTrustedDestination: LooseHandler = act('remove');
