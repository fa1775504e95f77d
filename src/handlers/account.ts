// Tag account: the wallet summary, assets, protocols and balances.
import type { LooseHandler } from '../http/types.js';
import { ok, pageQuery, who } from './ledger-common.js';

export const getAccount: LooseHandler = async (_c, ctx) => ok({ account: await ctx.services.ledger.account.getAccount(ctx.db, who(ctx)) });

export const listAssets: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listAssets(ctx.db, pageQuery(c)));

export const listProtocols: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listProtocols(ctx.db, pageQuery(c)));

export const listBalances: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), pageQuery(c)));

export const listCashBalances: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), { ...pageQuery(c), cashOnly: true }));
