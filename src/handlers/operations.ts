// Tag operations: every operation of the agent, and one by id (`include=onchain`).
import type { LooseHandler } from '../http/types.js';
import { ok, pageQuery, param, query } from './ledger-common.js';

export const listOperations: LooseHandler = async (c, ctx) =>
  ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...pageQuery(c), status: query(c, 'status'), type: query(c, 'type'), since: query(c, 'since') }));

export const getOperation: LooseHandler = async (c, ctx) => {
  const include = query(c, 'include');
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, param(c, 'id'), { include: include ? [include] : [] }) });
};
