// Tag account: the wallet summary, assets, protocols and balances.
import type { Handler, LooseHandler } from '../http/types.js';
import { ok, pageQuery, who } from './ledger-common.js';

export const getAccount: Handler<'getAccount'> = async (_req, ctx) => ({ status: 200, body: { ok: true, account: await ctx.services.ledger.account.getAccount(ctx.db, who(ctx)) } });

// Loose until the ledger's rows carry the document's enumerations (AssetRow.category and chain, ProtocolRow.kinds are strings).
export const listAssets: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listAssets(ctx.db, pageQuery(c)));

export const listProtocols: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listProtocols(ctx.db, pageQuery(c)));

export const listBalances: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), pageQuery(c)));

export const listCashBalances: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listBalances(ctx.db, who(ctx), { ...pageQuery(c), cashOnly: true }));
