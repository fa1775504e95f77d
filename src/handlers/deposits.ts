// Tag deposits: how funds reach the wallet (its Base address, the owner's bank transfers).
import type { Handler } from '../http/types.js';
import { who } from './ledger-common.js';

export const listDepositMethods: Handler<'listDepositMethods'> = async (req, ctx) => ({ status: 200, body: await ctx.services.ledger.account.listDepositMethods(ctx.db, who(ctx), req.query) });

export const getDepositAddress: Handler<'getDepositAddress'> = async (req, ctx) => ({
  status: 200,
  body: { ok: true, deposit_address: await ctx.services.ledger.account.getDepositAddress(ctx.db, who(ctx), req.query) },
});
