// Tag admin (/v1/admin): what only the operator may do. Actions tied to an owner are recorded in
// that owner's audit log.
import type { Handler } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import { OAuthInputError } from '../oauth/oauth.service.js';
import { answerDocument } from './document-answer.js';
import { created, ok, record } from './owner-common.js';

/** OAuth input problems are the caller's (400), as agentctl reported them before. */
const oauthInput = async <T>(fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof OAuthInputError) throw new ApiError('validation_failed', err.message, { errors: [{ location: 'body', path: '/', message: err.message }] });
    throw err;
  }
};

export const adminCreateOwner: Handler<'adminCreateOwner'> = async (req, ctx) => {
  const b = req.body;
  const owner = await ctx.services.agents.createOwner(ctx.db, { email: b.email, name: b.name ?? undefined, signerAddress: b.signer_address ?? null });
  await record(req, ctx, owner.owner_id, { type: 'owner', id: owner.owner_id });
  return created(owner);
};

export const adminDeleteOwner: Handler<'adminDeleteOwner'> = async (req, ctx) => {
  const ownerId = req.params.id;
  try {
    await ctx.services.agents.deleteOwner(ctx.db, ownerId);
  } catch (err) {
    if (!(err instanceof ApiError)) throw new ApiError('not_found', 'owner not found');
    throw err;
  }
  await record(req, ctx, ownerId, { type: 'owner', id: ownerId });
  return ok({ owner_id: ownerId, deleted: true });
};

export const adminCreateOwnerToken: Handler<'adminCreateOwnerToken'> = async (req, ctx) => {
  const ownerId = req.params.id;
  const token = await ctx.services.owner.createToken(ctx.db, ownerId, req.body.label ?? null);
  await record(req, ctx, ownerId, { type: 'owner_token', id: token.token_id });
  return created({ owner_id: token.owner_id, token: token.token });
};

export const adminSetPrice: Handler<'adminSetPrice'> = async (req, ctx) => {
  const b = req.body;
  const price = await ctx.services.ledger.ledger.setPrice(ctx.db, req.params.asset, b.price_usd, b.observed_at ? new Date(b.observed_at) : ctx.clock.now());
  return ok({ asset: price.asset, price_usd: b.price_usd, observed_at: price.observedAt?.toISOString() ?? null });
};

export const adminSetFailingAddress: Handler<'adminSetFailingAddress'> = async (req, ctx) => {
  const address = req.params.address;
  const failing = req.body.failing;
  await ctx.services.ledger.ledger.setFailingAddress(ctx.db, address, failing);
  return ok({ address: address.toLowerCase(), failing });
};

export const adminClaimOneOffPayment: Handler<'adminClaimOneOffPayment'> = async (req, ctx) => {
  const row = await ctx.services.ledger.payments.claimOneOff(ctx.db, req.params.id);
  return ok({ one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status });
};

export const adminAddOAuthClient: Handler<'adminAddOAuthClient'> = async (req, ctx) => {
  const b = req.body;
  return created(await oauthInput(() => ctx.services.oauth.addClient(ctx.db, { name: b.name, redirectUris: b.redirect_uris })));
};

export const adminRotateOAuthKeys: Handler<'adminRotateOAuthKeys'> = async (_req, ctx) => ok(await ctx.services.oauth.rotateKeys(ctx.db));

export const adminListVaults: Handler<'adminListVaults'> = async (_req, ctx) => ok({ vaults: await ctx.services.defi.earn.listVaults(ctx.db) });

export const adminAddVault: Handler<'adminAddVault'> = async (req, ctx) => {
  const b = req.body;
  const vault = await ctx.services.defi.earn.addVault(ctx.db, {
    name: b.name,
    protocol: b.protocol,
    asset: b.asset,
    apyBps: b.apy_bps,
    capacity: b.capacity ?? null,
    address: b.address,
    decimalsOffset: b.decimals_offset,
    rewardAsset: b.reward_asset ?? null,
    rewardBps: b.reward_bps,
  });
  return created({ ...vault });
};

export const adminAddMarket: Handler<'adminAddMarket'> = async (req, ctx) => {
  const b = req.body;
  const market = await ctx.services.defi.borrow.addMarket(ctx.db, {
    asset: b.asset,
    protocol: b.protocol,
    ltvBps: b.ltv_bps,
    liquidationThresholdBps: b.liquidation_threshold_bps,
    borrowAprBps: b.borrow_apr_bps,
    collateralEnabled: b.collateral,
    borrowEnabled: b.borrowable,
  });
  return created({ ...market });
};

export const getAdminOpenApi: Handler<'getAdminOpenApi'> = async (req, ctx) => answerDocument<'getAdminOpenApi'>(req.headers['if-none-match'], ctx.services.self.publicDocument('full'));

export const adminListOwners: Handler<'adminListOwners'> = async (req, ctx) => ok(await ctx.services.owner.listOwners(ctx.db, req.query));
