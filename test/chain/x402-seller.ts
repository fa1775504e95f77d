// A real @x402/express seller on loopback HTTPS whose @x402/core facilitator (the @x402/evm exact scheme with a viem
// signer, Anvil's dev account 1 paying the gas) settles on the test's Anvil, and the x402 service of `s` rebuilt to
// trust the seller's CA. `/weather` delivers; `/weather-fails` settles the payment itself and then answers 500.
import type { Server } from 'node:https';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { publicActions } from 'viem';
import { createSealer } from '../../src/lib/crypto.js';
import { createX402Service } from '../../src/services/x402/service.js';
import type { AnvilNode } from '../helpers/anvil.js';
import type { ChainServer } from '../helpers/chain.js';
import { createTestPki } from '../webhooks/helpers/receiver.js';

export interface ChainSeller {
  url: string;
  /** The transaction hash of every settlement the facilitator made, in order. */
  settledBy: string[];
  close(): Promise<void>;
}

export async function startChainSeller(node: AnvilNode, s: ChainServer, payTo: string): Promise<ChainSeller> {
  const settledBy: string[] = [];
  const wallet = node.devWallet(1).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: wallet.account.address,
    readContract: (args) => wallet.readContract(args as never),
    verifyTypedData: (args) => wallet.verifyTypedData(args as never),
    writeContract: (args) => wallet.writeContract(args as never),
    sendTransaction: (args) => wallet.sendTransaction(args as never),
    waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt({ ...args, pollingInterval: 50 } as never),
    getCode: (args) => wallet.getCode(args),
  });
  const facilitator = new x402Facilitator().register('eip155:31337', new ExactEvmFacilitatorScheme(signer));
  const facilitatorClient = {
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: async (p: PaymentPayload, r: PaymentRequirements) => {
      const result = await facilitator.settle(p, r);
      if (result.success) settledBy.push(result.transaction);
      return result;
    },
    getSupported: async () => facilitator.getSupported(),
  };
  const resourceServer = new x402ResourceServer(facilitatorClient as never).register('eip155:31337', new ExactEvmServerScheme());
  const accepts = { scheme: 'exact', price: { amount: '10000', asset: s.token, extra: { name: 'USD Coin', version: '2' } }, network: 'eip155:31337', payTo, maxTimeoutSeconds: 120 } as const;
  const app = express();
  app.use(
    paymentMiddleware(
      {
        'GET /weather': { accepts, description: 'Weather report' },
        'GET /weather-fails': { accepts, description: 'Weather report from a seller that breaks once paid' },
      },
      resourceServer,
    ),
  );
  app.get('/weather', (_req, res) => {
    res.json({ forecast: 'sunny' });
  });
  // The middleware verified the payment and settles only after a 2xx: this seller settles first, then fails (no receipt).
  app.get('/weather-fails', async (req, res) => {
    const payload = JSON.parse(Buffer.from(req.header('payment-signature')!, 'base64').toString('utf8')) as PaymentPayload;
    const settled = await facilitatorClient.settle(payload, payload.accepted);
    res.status(500).json({ error: 'the forecast broke', settled: settled.success });
  });
  const pki = await createTestPki();
  const server: Server = createServer({ key: pki.key, cert: pki.cert }, app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The service trusts the seller's test CA; it signs for the chain's token and tracks authorizations on it.
  (s.services as { x402: unknown }).x402 = createX402Service({
    config: s.config,
    sealer: createSealer(s.config.masterKey),
    clock: s.clock,
    ledger: s.services.ledger,
    ca: pki.ca,
    chain: s.built.chain,
  });
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    settledBy,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
