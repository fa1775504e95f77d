// Tag recipients: the owner's payees for this agent, and resolution of a `to` value.
import type { LooseHandler } from '../http/types.js';
import { body, ok, pageQuery, param, who } from './ledger-common.js';

export const listRecipients: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.payments.listRecipients(ctx.db, ctx.principal.agentId, pageQuery(c)));

export const getRecipient: LooseHandler = async (c, ctx) => ok({ recipient: await ctx.services.ledger.payments.getRecipient(ctx.db, ctx.principal.agentId, param(c, 'id')) });

export const resolveRecipient: LooseHandler = async (c, ctx) => ok({ resolution: await ctx.services.ledger.payments.resolve(ctx.db, who(ctx), body<{ to: string; asset?: string; action?: string }>(c)) });
