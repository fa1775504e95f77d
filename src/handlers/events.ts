// Tag events: the agent's events, newest first, and one event.
import type { LooseHandler } from '../http/types.js';
import { ok, pageQuery, param, query } from './ledger-common.js';

export const listEvents: LooseHandler = async (c, ctx) => ok(await ctx.services.events.list(ctx.db, ctx.principal.agentId, { ...pageQuery(c), type: query(c, 'type'), since: query(c, 'since') }));

export const getEvent: LooseHandler = async (c, ctx) => ok({ event: await ctx.services.events.get(ctx.db, ctx.principal.agentId, param(c, 'id')) });
