// Tag account: the wallet summary, assets, protocols and balances.
import type { Handler } from '../http/types.js';
import { who } from './ledger-common.js';

export const getAccount: Handler<'getAccount'> = async (_req, ctx) => ({ status: 200, body: { ok: true, account: await ctx.services.ledger.account.getAccount(ctx.db, who(ctx)) } });

export const listAssets: Handler<'listAssets'> = async (req, ctx) => ({ status: 200, body: await ctx.services.ledger.account.listAssets(ctx.db, req.query) });

export const listProtocols: Handler<'listProtocols'> = async (req, ctx) => ({ status: 200, body: await ctx.services.ledger.account.listProtocols(ctx.db, req.query) });

export const listBalances: Handler<'listBalances'> = async (req, ctx) => ({ status: 200, body: await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), req.query) });

export const listCashBalances: Handler<'listCashBalances'> = async (req, ctx) => ({
  status: 200,
  body: await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), { ...req.query, cashOnly: true }),
});
