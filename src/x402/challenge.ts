// x402 challenges: reads a v1 402 JSON body (`accepts[]`) or a v2 `PAYMENT-REQUIRED` header, and picks the requirement
// this service can pay (scheme `exact`, USDC on Base). Pure: no I/O.

/** USDC on Base (chain 8453): the only asset x402 payments are made in (spec 4.1). */
export const BASE_CHAIN_ID = 8453;
export const USDC_BASE_ADDRESS = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const USDC_DECIMALS = 6;
export const USDC_EIP712 = { name: 'USD Coin', version: '2' } as const;
/** Network names of Base in each protocol version. */
export const BASE_NETWORKS = { 1: 'base', 2: 'eip155:8453' } as const;

export type X402Version = 1 | 2;

/**
 * Where x402 payments are made: USDC on Base in simulated mode; in evm mode (issue 11) the configured token on the
 * node's chain (v2 network `eip155:<id>`; a v1 name only for Base and Base Sepolia).
 */
export interface PayableNetwork {
  chainId: number;
  networks: { 1: string | null; 2: string };
  usdc: string;
  eip712: { name: string; version: string };
}

export const BASE_PAYABLE: PayableNetwork = { chainId: BASE_CHAIN_ID, networks: BASE_NETWORKS, usdc: USDC_BASE_ADDRESS, eip712: USDC_EIP712 };

/** v1 network names of the chains that have one. */
const V1_NETWORK_NAMES: Record<number, string> = { 8453: 'base', 84532: 'base-sepolia' };

/** The payable network of an EVM chain whose USDC is the token at `usdc`. */
export const payableOnChain = (chainId: number, usdc: string, eip712: { name: string; version: string }): PayableNetwork => ({
  chainId,
  networks: { 1: V1_NETWORK_NAMES[chainId] ?? null, 2: `eip155:${chainId}` },
  usdc,
  eip712,
});

/** One entry of a challenge's `accepts[]`, as the seller sent it (kept verbatim: v2 echoes it back). */
export type RawRequirement = Record<string, unknown>;

export interface Challenge {
  version: X402Version;
  accepts: RawRequirement[];
  /** v2: the challenge's `resource` object, echoed in the payment payload. */
  resource: unknown;
  error: string | null;
}

/** A requirement read into typed fields. `amount` is in base units of the asset. */
export interface Requirement {
  version: X402Version;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: bigint;
  maxTimeoutSeconds: number | null;
  resource: string | null;
  description: string | null;
  raw: RawRequirement;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UINT = /^[0-9]{1,78}$/;

/** Decodes base64 (standard or URL-safe) JSON; null when it is not. */
export function decodeBase64Json(value: string): unknown {
  try {
    const text = Buffer.from(value.trim(), 'base64').toString('utf8');
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export const encodeBase64Json = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64');

/**
 * Reads the challenge of a 402 answer: the v2 `PAYMENT-REQUIRED` header wins when present and valid, else a v1 JSON
 * body `{ x402Version: 1, accepts: [...] }`. Null when neither holds a non-empty `accepts` array.
 */
export function parseChallenge(input: { paymentRequiredHeader?: string | null; body?: unknown }): Challenge | null {
  if (input.paymentRequiredHeader) {
    const decoded = decodeBase64Json(input.paymentRequiredHeader);
    if (isObject(decoded) && Array.isArray(decoded.accepts) && decoded.accepts.length > 0 && decoded.accepts.every(isObject)) {
      return { version: 2, accepts: decoded.accepts as RawRequirement[], resource: decoded.resource ?? null, error: str(decoded.error) };
    }
  }
  const body = input.body;
  if (isObject(body) && Array.isArray(body.accepts) && body.accepts.length > 0 && body.accepts.every(isObject)) {
    const version: X402Version = body.x402Version === 2 ? 2 : 1;
    return { version, accepts: body.accepts as RawRequirement[], resource: body.resource ?? null, error: str(body.error) };
  }
  return null;
}

/**
 * Reads one requirement. v1 carries `maxAmountRequired` and a network name (`base`); v2 carries `amount` and a CAIP-2
 * network (`eip155:8453`). The version is the challenge's when known, else inferred from those fields.
 * Returns the problems instead when fields are missing or malformed.
 */
export function readRequirement(raw: RawRequirement, version?: X402Version): Requirement | { problems: string[] } {
  const problems: string[] = [];
  const v: X402Version = version ?? (raw.amount !== undefined && raw.maxAmountRequired === undefined ? 2 : String(raw.network ?? '').startsWith('eip155:') ? 2 : 1);
  const amountField = v === 1 ? 'maxAmountRequired' : 'amount';
  const amountText = str(raw[amountField]) ?? (typeof raw[amountField] === 'number' && Number.isSafeInteger(raw[amountField]) ? String(raw[amountField]) : null);
  if (amountText === null || !UINT.test(amountText)) problems.push(`${amountField} must be a string of base units`);
  const scheme = str(raw.scheme);
  if (!scheme) problems.push('scheme is required');
  const network = str(raw.network);
  if (!network) problems.push('network is required');
  const asset = str(raw.asset);
  if (!asset) problems.push('asset is required');
  const payTo = str(raw.payTo);
  if (!payTo || !EVM_ADDRESS.test(payTo)) problems.push('payTo must be a 0x EVM address');
  const timeout = raw.maxTimeoutSeconds;
  const maxTimeoutSeconds = typeof timeout === 'number' && Number.isInteger(timeout) && timeout > 0 ? timeout : null;
  if (problems.length > 0) return { problems };
  const resource = v === 1 ? str(raw.resource) : null;
  return { version: v, scheme: scheme!, network: network!, asset: asset!, payTo: payTo!, amount: BigInt(amountText!), maxTimeoutSeconds, resource, description: str(raw.description), raw };
}

/** Why this service cannot pay a requirement, or null when it can (scheme `exact`, USDC on the payable network, amount > 0). */
export function unsupportedReason(req: Requirement, payable: PayableNetwork = BASE_PAYABLE): string | null {
  if (req.scheme !== 'exact') return `scheme ${req.scheme} is not supported (only exact)`;
  const base = payable === BASE_PAYABLE;
  if (req.network !== payable.networks[1] && req.network !== payable.networks[2]) {
    return `network ${req.network} is not supported (${base ? 'only Base: base or eip155:8453' : `only ${[payable.networks[1], payable.networks[2]].filter(Boolean).join(' or ')}`})`;
  }
  if (req.asset.toLowerCase() !== payable.usdc.toLowerCase()) return `asset ${req.asset} is not USDC on ${base ? 'Base' : `chain ${payable.chainId}`} (${payable.usdc})`;
  if (req.amount <= 0n) return 'the required amount must be greater than zero';
  return null;
}

export interface Choice {
  /** The first payable requirement, else null. */
  supported: Requirement | null;
  /** Every requirement that could be read (the first one stands for the price when none is payable). */
  readable: Requirement[];
}

export function chooseRequirement(challenge: Challenge, payable: PayableNetwork = BASE_PAYABLE): Choice {
  const readable: Requirement[] = [];
  for (const raw of challenge.accepts) {
    const req = readRequirement(raw, challenge.version);
    if ('problems' in req) continue;
    readable.push(req);
  }
  return { supported: readable.find((r) => unsupportedReason(r, payable) === null) ?? null, readable };
}

/** Reads a seller's `X-PAYMENT-RESPONSE` / `PAYMENT-RESPONSE` header: settled when it decodes with `success: true`. */
export function readSettlement(headers: Record<string, string>): { settled: boolean; transaction: string | null } {
  const value = headers['payment-response'] ?? headers['x-payment-response'];
  if (!value) return { settled: false, transaction: null };
  const decoded = decodeBase64Json(value);
  if (!isObject(decoded)) return { settled: false, transaction: null };
  return { settled: decoded.success === true, transaction: str(decoded.transaction) };
}
