// A real x402 seller on loopback HTTPS (own CA via selfsigned): @x402/express for v2 routes, a hand-written v1 route,
// both verified and settled by an in-process @x402/core facilitator whose offline EVM signer checks EIP-712
// signatures with viem and reports the USDC contract as deployed.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import { encodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { keccak256, toHex, verifyTypedData, type Hex } from 'viem';
import { createTestPki } from '../webhooks/helpers/receiver.js';

export const SELLER_PAY_TO = '0x1111111111111111111111111111111111111111';
export const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const FACILITATOR_ADDRESS = '0x2222222222222222222222222222222222222222';

export interface SellerRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export interface Seller {
  ca: string;
  url(path: string): string;
  requests: SellerRequest[];
  /** Every transferWithAuthorization the facilitator "broadcast": (from, to, value, nonce). */
  settlements: Array<{ from: string; to: string; value: bigint; nonce: string }>;
  close(): Promise<void>;
}

/** The facilitator's chain: signatures checked offline (viem), USDC deployed, balances ample, each nonce usable once. */
function createOfflineFacilitatorSigner(settlements: Seller['settlements']) {
  const used = new Set<string>();
  return {
    getAddresses: () => [FACILITATOR_ADDRESS] as readonly `0x${string}`[],
    async readContract(args: { functionName: string; args?: readonly unknown[] }) {
      if (args.functionName === 'balanceOf') return 10n ** 12n;
      if (args.functionName === 'name') return 'USD Coin';
      if (args.functionName === 'version') return '2';
      if (args.functionName === 'authorizationState') return used.has(String(args.args?.[1]).toLowerCase());
      // transferWithAuthorization simulation: succeeds unless the nonce was spent.
      if (args.functionName === 'transferWithAuthorization' && used.has(String(args.args?.[5]).toLowerCase())) throw new Error('FiatTokenV2: authorization is used or canceled');
      return undefined;
    },
    verifyTypedData: (args: Parameters<typeof verifyTypedData>[0]) => verifyTypedData(args as never),
    async writeContract(args: { functionName: string; args: readonly unknown[] }) {
      const [from, to, value, , , nonce] = args.args as [string, string, bigint, bigint, bigint, string];
      const key = String(nonce).toLowerCase();
      if (used.has(key)) throw new Error('FiatTokenV2: authorization is used or canceled');
      used.add(key);
      settlements.push({ from, to, value, nonce: key });
      return keccak256(toHex(`settle:${key}`));
    },
    sendTransaction: async () => keccak256(toHex('unused')) as Hex,
    waitForTransactionReceipt: async () => ({ status: 'success' }),
    // Only the USDC contract has code: payers are EOAs, so their signatures are checked as ECDSA.
    getCode: async ({ address }: { address: string }) => (address.toLowerCase() === USDC.toLowerCase() ? '0x60806040' : '0x') as `0x${string}`,
  };
}

export async function startSeller(): Promise<Seller> {
  const pki = await createTestPki();
  const requests: SellerRequest[] = [];
  const settlements: Seller['settlements'] = [];
  const signer = createOfflineFacilitatorSigner(settlements);
  const facilitator = new x402Facilitator().register('eip155:8453', new ExactEvmFacilitatorScheme(signer)).registerV1('base' as `${string}:${string}`, new ExactEvmSchemeV1(signer));
  const facilitatorClient = {
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: (p: PaymentPayload, r: PaymentRequirements) => facilitator.settle(p, r),
    getSupported: async () => facilitator.getSupported(),
  };
  const resourceServer = new x402ResourceServer(facilitatorClient as never).register('eip155:8453', new ExactEvmServerScheme());

  const app = express();
  app.use(express.json());
  app.use((req, _res, next) => {
    requests.push({ method: req.method, path: req.path, headers: req.headers, body: req.body });
    next();
  });
  app.use(
    paymentMiddleware(
      {
        'GET /v2/weather': { accepts: { scheme: 'exact', price: '$0.01', network: 'eip155:8453', payTo: SELLER_PAY_TO, maxTimeoutSeconds: 120 }, description: 'Weather report' },
        'POST /v2/answer': { accepts: { scheme: 'exact', price: '$0.25', network: 'eip155:8453', payTo: SELLER_PAY_TO }, description: 'An answer' },
        'GET /v2/premium': { accepts: { scheme: 'exact', price: '$5', network: 'eip155:8453', payTo: SELLER_PAY_TO }, description: 'Premium' },
        'GET /v2/paid-api': { accepts: { scheme: 'exact', price: '$1.5', network: 'eip155:8453', payTo: SELLER_PAY_TO }, description: 'A paid API at 1.5 USDC' },
        'GET /v2/fails-after-settlement': { accepts: { scheme: 'exact', price: '$0.02', network: 'eip155:8453', payTo: SELLER_PAY_TO }, description: 'A seller that breaks once paid' },
      },
      resourceServer,
    ),
  );
  app.get('/v2/paid-api', (_req, res) => {
    res.json({ result: 'paid content' });
  });
  // The middleware settles only after a 2xx: this seller settles the verified payment itself, sends the receipt and fails.
  app.get('/v2/fails-after-settlement', async (req, res) => {
    const payload = JSON.parse(Buffer.from(req.header('payment-signature')!, 'base64').toString('utf8')) as PaymentPayload;
    res.setHeader('PAYMENT-RESPONSE', encodePaymentResponseHeader(await facilitator.settle(payload, payload.accepted)));
    res.status(500).json({ error: 'broke after settlement' });
  });
  app.get('/v2/weather', (_req, res) => {
    res.json({ forecast: 'sunny', temperature_c: 21 });
  });
  app.post('/v2/answer', (req, res) => {
    res.json({ answer: 42, question: (req.body as { question?: string })?.question ?? null });
  });
  app.get('/v2/premium', (_req, res) => {
    res.json({ premium: true });
  });

  // A v1 seller by hand: the challenge in the JSON body, the payment in X-PAYMENT, the receipt in X-PAYMENT-RESPONSE.
  const v1Requirement = (resource: string, amount: string, asset = USDC, network = 'base') => ({
    scheme: 'exact',
    network,
    maxAmountRequired: amount,
    resource,
    description: 'Quarterly report',
    mimeType: 'application/json',
    outputSchema: {},
    payTo: SELLER_PAY_TO,
    maxTimeoutSeconds: 300,
    asset,
    extra: { name: 'USD Coin', version: '2' },
  });
  app.get('/v1/report', async (req, res) => {
    const requirement = v1Requirement(`https://${req.headers.host}/v1/report`, '50000');
    const header = req.header('x-payment');
    if (!header) {
      res.status(402).json({ x402Version: 1, error: 'X-PAYMENT header is required', accepts: [requirement] });
      return;
    }
    const payload = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as PaymentPayload;
    const verified = await facilitator.verify(payload, requirement as never);
    if (!verified.isValid) {
      res.status(402).json({ x402Version: 1, error: verified.invalidReason, accepts: [requirement] });
      return;
    }
    const settled = await facilitator.settle(payload, requirement as never);
    res.setHeader('X-PAYMENT-RESPONSE', encodePaymentResponseHeader(settled));
    res.json({ report: 'Q3', revenue: 1234 });
  });
  app.get('/v1/eth-only', (req, res) => {
    res.status(402).json({ x402Version: 1, error: 'pay', accepts: [v1Requirement(`https://${req.headers.host}/v1/eth-only`, '1000000000000000', '0x4200000000000000000000000000000000000006')] });
  });
  app.get('/free', (_req, res) => {
    res.json({ free: true });
  });
  app.get('/boom', (_req, res) => {
    res.status(500).json({ error: 'boom' });
  });
  app.get('/redirect', (_req, res) => {
    res.redirect(302, '/free');
  });
  app.get('/big', (_req, res) => {
    res.type('text/plain').send('x'.repeat(200 * 1024));
  });
  app.get('/slow', (_req, res) => {
    setTimeout(() => res.json({ late: true }), 3000).unref();
  });

  const server: Server = createServer({ key: pki.key, cert: pki.cert }, app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ca: pki.ca,
    url: (path) => `https://127.0.0.1:${port}${path}`,
    requests,
    settlements,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
