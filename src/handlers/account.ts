// Tag account: the wallet summary, assets, protocols and balances.
import type { Handler } from '../http/types.js';
import { ok, pageQuery, who } from './ledger-common.js';

export const getAccount: Handler = async (_c, ctx) => ok({ account: await ctx.services.ledger.account.getAccount(ctx.db, who(ctx)) });

export const listAssets: Handler = async (c, ctx) => ok(await ctx.services.ledger.account.listAssets(ctx.db, pageQuery(c)));

export const listProtocols: Handler = async (c, ctx) => ok(await ctx.services.ledger.account.listProtocols(ctx.db, pageQuery(c)));

export const listBalances: Handler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), pageQuery(c)));

export const listCashBalances: Handler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), { ...pageQuery(c), cashOnly: true }));
