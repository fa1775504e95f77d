// x402 values shown to the agent: the price of a challenge, amounts in USDC, and the refusals of
// the inputs the document cannot check (money and the seller's own requirements).
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { USDC_DECIMALS, type PayableNetwork, type Requirement } from '../../x402/challenge.js';

export const DEFAULT_MAX_TIMEOUT_SECONDS = 60;
/** The longest validity the service signs: the document's bound on `max_timeout_seconds`, applied to a seller's own value too. */
export const MAX_TIMEOUT_SECONDS = 3600;

export const invalid = (message: string, field: string, details: Record<string, unknown> = {}) =>
  new ApiError('validation_failed', message, { field, ...details, errors: [{ location: 'body', path: `/${field}`, message }] });

export const short = (address: string) => `${address.slice(0, 6)}…${address.slice(-4)}`;
export const usdc = (units: bigint) => formatAmount(units, USDC_DECIMALS);

/**
 * A USDC amount in base units, as x402 itself states amounts (and Hightop's x402 routes take them): an integer string,
 * `"1000000"` = 1 USDC. The document's pattern refuses decimals; zero is refused here (issue 26, item 1).
 */
export function parseUsdcBaseUnits(value: string, field: string): bigint {
  if (!/^[0-9]+$/.test(value)) throw invalid(`${field} must be an integer string of USDC base units ("1000000" = 1 USDC)`, field);
  const units = BigInt(value);
  if (units <= 0n) throw invalid(`${field} must be greater than zero`, field);
  return units;
}

/** The validity asked for (the document bounds it), else the requirement's own capped at the maximum, else the default. */
export function timeoutSeconds(value: number | undefined, fallback: number | null): number {
  return value ?? Math.min(fallback ?? DEFAULT_MAX_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS);
}

/** The URL of a v2 challenge's `resource` object (or a v1 requirement's `resource` string). */
function resourceUrl(req: Requirement, challengeResource: unknown): string | null {
  if (req.resource) return req.resource;
  if (challengeResource && typeof challengeResource === 'object' && typeof (challengeResource as { url?: unknown }).url === 'string') return (challengeResource as { url: string }).url;
  return null;
}

export function priceOf(req: Requirement, challengeResource: unknown, payable: PayableNetwork): Schema<'X402Price'> {
  const isUsdc = (req.network === payable.networks[1] || req.network === payable.networks[2]) && req.asset.toLowerCase() === payable.usdc.toLowerCase();
  const description =
    req.description ?? (challengeResource && typeof (challengeResource as { description?: unknown }).description === 'string' ? (challengeResource as { description: string }).description : null);
  return {
    // Unknown assets have unknown decimals: their amount stays in base units.
    amount: isUsdc ? usdc(req.amount) : req.amount.toString(),
    amount_base_units: req.amount.toString(),
    asset: req.asset,
    asset_symbol: isUsdc ? 'USDC' : null,
    network: req.network,
    pay_to: req.payTo,
    scheme: req.scheme,
    x402_version: req.version,
    max_timeout_seconds: req.maxTimeoutSeconds,
    resource: resourceUrl(req, challengeResource),
    description,
  };
}
