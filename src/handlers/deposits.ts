// Tag deposits: how funds reach the wallet (its Base address, the owner's bank transfers).
import type { LooseHandler } from '../http/types.js';
import { ok, pageQuery, query, who } from './ledger-common.js';

export const listDepositMethods: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listDepositMethods(ctx.db, who(ctx), pageQuery(c)));

export const getDepositAddress: LooseHandler = async (c, ctx) => ok({ deposit_address: await ctx.services.ledger.account.getDepositAddress(ctx.db, who(ctx), { asset: query(c, 'asset'), chain: query(c, 'chain') }) });
