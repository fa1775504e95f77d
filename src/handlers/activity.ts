// Tag activity: the wallet's financial events, newest first.
import type { LooseHandler } from '../http/types.js';
import { ok, pageQuery, query, who } from './ledger-common.js';

export const listActivity: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.account.listActivity(ctx.db, who(ctx), { ...pageQuery(c), type: query(c, 'type'), since: query(c, 'since') }));
