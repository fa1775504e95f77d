// Tag activity: the wallet's financial events, newest first.
import type { Handler } from '../http/types.js';
import { who } from './ledger-common.js';

export const listActivity: Handler<'listActivity'> = async (req, ctx) => ({ status: 200, body: await ctx.services.ledger.account.listActivity(ctx.db, who(ctx), req.query) });
