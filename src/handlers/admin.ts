// Tag admin (/v1/admin): what only the operator may do. Actions tied to an owner are recorded in
// that owner's audit log.
import type { LooseHandler } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import { OAuthInputError } from '../oauth/oauth.service.js';
import { body, ok, param } from './ledger-common.js';
import { okStatus, record } from './owner-common.js';

type Body = Record<string, unknown>;

/** OAuth input problems are the caller's (400), as agentctl reported them before. */
const oauthInput = async <T>(fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof OAuthInputError) throw new ApiError('validation_failed', err.message, { errors: [{ location: 'body', path: '/', message: err.message }] });
    throw err;
  }
};

export const adminCreateOwner: LooseHandler = async (c, ctx) => {
  const b = body<{ email: string; name?: string | null }>(c);
  const created = await ctx.services.agents.createOwner(ctx.db, { email: b.email, name: b.name ?? undefined });
  await record(c, ctx, created.owner_id, { type: 'owner', id: created.owner_id });
  return okStatus(201, created);
};

export const adminDeleteOwner: LooseHandler = async (c, ctx) => {
  const ownerId = param(c, 'id');
  try {
    await ctx.services.agents.deleteOwner(ctx.db, ownerId);
  } catch (err) {
    if (!(err instanceof ApiError)) throw new ApiError('not_found', 'owner not found');
    throw err;
  }
  await record(c, ctx, ownerId, { type: 'owner', id: ownerId });
  return ok({ owner_id: ownerId, deleted: true });
};

export const adminCreateOwnerToken: LooseHandler = async (c, ctx) => {
  const ownerId = param(c, 'id');
  const created = await ctx.services.owner.createToken(ctx.db, ownerId, (body<Body>(c).label as string | undefined) ?? null);
  await record(c, ctx, ownerId, { type: 'owner_token', id: created.token_id });
  return okStatus(201, { owner_id: created.owner_id, token: created.token });
};

export const adminSetPrice: LooseHandler = async (c, ctx) => {
  const b = body<{ price_usd: string; observed_at?: string }>(c);
  const price = await ctx.services.ledger.ledger.setPrice(ctx.db, param(c, 'asset'), b.price_usd, b.observed_at ? new Date(b.observed_at) : ctx.clock.now());
  return ok({ asset: price.asset, price_usd: b.price_usd, observed_at: price.observedAt?.toISOString() ?? null });
};

export const adminSetFailingAddress: LooseHandler = async (c, ctx) => {
  const address = param(c, 'address');
  const failing = body<{ failing: boolean }>(c).failing;
  await ctx.services.ledger.ledger.setFailingAddress(ctx.db, address, failing);
  return ok({ address: address.toLowerCase(), failing });
};

export const adminClaimOneOffPayment: LooseHandler = async (c, ctx) => {
  const row = await ctx.services.ledger.payments.claimOneOff(ctx.db, param(c, 'id'));
  return ok({ one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status });
};

export const adminAddOAuthClient: LooseHandler = async (c, ctx) => {
  const b = body<{ name: string; redirect_uris: string[] }>(c);
  return okStatus(201, await oauthInput(() => ctx.services.oauth.addClient(ctx.db, { name: b.name, redirectUris: b.redirect_uris })));
};

export const adminRotateOAuthKeys: LooseHandler = async (_c, ctx) => ok(await ctx.services.oauth.rotateKeys(ctx.db));

export const adminListVaults: LooseHandler = async (_c, ctx) => ok({ vaults: await ctx.services.defi.earn.listVaults(ctx.db) });

export const adminAddVault: LooseHandler = async (c, ctx) => {
  const b = body<Body>(c);
  const vault = await ctx.services.defi.earn.addVault(ctx.db, {
    name: b.name as string,
    protocol: b.protocol as string,
    asset: b.asset as string,
    apyBps: b.apy_bps as number,
    capacity: (b.capacity as string | null | undefined) ?? null,
    address: b.address as string | undefined,
    decimalsOffset: b.decimals_offset as number | undefined,
    rewardAsset: (b.reward_asset as string | null | undefined) ?? null,
    rewardBps: b.reward_bps as number | undefined,
  });
  return okStatus(201, { ...vault });
};

export const adminAddMarket: LooseHandler = async (c, ctx) => {
  const b = body<Body>(c);
  const market = await ctx.services.defi.borrow.addMarket(ctx.db, {
    asset: b.asset as string,
    protocol: b.protocol as string | undefined,
    ltvBps: b.ltv_bps as number,
    liquidationThresholdBps: b.liquidation_threshold_bps as number,
    borrowAprBps: b.borrow_apr_bps as number,
    collateralEnabled: b.collateral as boolean | undefined,
    borrowEnabled: b.borrowable as boolean | undefined,
  });
  return okStatus(201, { ...market });
};
