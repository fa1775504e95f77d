// Tag recipients: the owner's payees for this agent, and resolution of a `to` value.
import type { Handler } from '../http/types.js';
import { ok, who } from './ledger-common.js';

export const listRecipients: Handler<'listRecipients'> = async (req, ctx) => ok(await ctx.services.ledger.payments.listRecipients(ctx.db, ctx.principal.agentId, req.query));

export const getRecipient: Handler<'getRecipient'> = async (req, ctx) => ok({ recipient: await ctx.services.ledger.payments.getRecipient(ctx.db, ctx.principal.agentId, req.params.id) });

export const resolveRecipient: Handler<'resolveRecipient'> = async (req, ctx) => ok(await ctx.services.ledger.payments.resolveRecipient(ctx.db, who(ctx), req.body));
