// Tag operations: every operation of the agent, and one by id (`include=onchain`).
import type { Handler } from '../http/types.js';
import { ok } from './ledger-common.js';

export const listOperations: Handler<'listOperations'> = async (req, ctx) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, req.query));

export const getOperation: Handler<'getOperation'> = async (req, ctx) => {
  const { include } = req.query;
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, req.params.id, { include: include ? [include] : [] }) });
};
