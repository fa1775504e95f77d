// Pure x402 pieces: the EIP-3009 golden signature, the payment header of each version, challenge parsing and choice.
import { expect } from 'chai';
import { verifyTypedData } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { chooseRequirement, decodeBase64Json, encodeBase64Json, parseChallenge, readRequirement, readSettlement, unsupportedReason } from '../../src/x402/challenge.js';
import { encodePaymentHeader, randomNonce, signTransferAuthorization } from '../../src/x402/signing.js';

const KEY = '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318';
const PAY_TO = '0x1111111111111111111111111111111111111111';
const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const NONCE = `0x${'ab'.repeat(32)}` as const;

const v1Req = (over: Record<string, unknown> = {}) => ({
  scheme: 'exact',
  network: 'base',
  maxAmountRequired: '10000',
  resource: 'https://seller.example.com/r',
  description: 'r',
  mimeType: 'application/json',
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  asset: USDC,
  extra: { name: 'USD Coin', version: '2' },
  ...over,
});
const v2Req = (over: Record<string, unknown> = {}) => ({
  scheme: 'exact',
  network: 'eip155:8453',
  amount: '10000',
  asset: USDC,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: 'USD Coin', version: '2' },
  ...over,
});

describe('x402 signing (EIP-3009 TransferWithAuthorization)', () => {
  it('yields the golden signature when the key, nonce and window are fixed', async () => {
    const account = privateKeyToAccount(KEY);
    const { authorization, signature } = await signTransferAuthorization({ account, payTo: PAY_TO, amount: 10_000n, nonce: NONCE, validAfter: 0n, validBefore: 1_767_225_600n });
    expect(account.address).to.equal('0x2c7536E3605D9C16a7a3D7b1898e529396a65c23');
    expect(signature).to.equal('0xc7e95a8b9066b0ebbeba24c2b6e1e4538dfa458b8c71835e39ff5f536ae420af6ba941de58354e46910d3a6280d88c830ccb15992a515176722c65e5957a82611b');
    expect(authorization).to.deep.equal({ from: account.address, to: PAY_TO, value: '10000', validAfter: '0', validBefore: '1767225600', nonce: NONCE });
  });

  it('verifies against the USDC-on-Base domain written out independently', async () => {
    const account = privateKeyToAccount(KEY);
    const nonce = randomNonce();
    const { signature } = await signTransferAuthorization({ account, payTo: PAY_TO, amount: 1n, nonce, validAfter: 0n, validBefore: 2_000_000_000n });
    const typed = {
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' as const },
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization' as const,
      message: { from: account.address, to: PAY_TO as `0x${string}`, value: 1n, validAfter: 0n, validBefore: 2_000_000_000n, nonce },
    };
    expect(await verifyTypedData({ address: account.address, ...typed, signature })).to.equal(true);
    expect(await verifyTypedData({ address: account.address, ...typed, message: { ...typed.message, value: 2n }, signature })).to.equal(false);
    expect(await verifyTypedData({ address: account.address, ...typed, domain: { ...typed.domain, chainId: 84532 }, signature })).to.equal(false);
  });

  it('draws a fresh 32-byte lower-case nonce each time', () => {
    const a = randomNonce();
    expect(a).to.match(/^0x[0-9a-f]{64}$/);
    expect(randomNonce()).to.not.equal(a);
  });

  it('encodes the v1 X-PAYMENT and the v2 PAYMENT-SIGNATURE payloads per the x402 specification', async () => {
    const account = privateKeyToAccount(KEY);
    const signed = await signTransferAuthorization({ account, payTo: PAY_TO, amount: 10_000n, nonce: NONCE, validAfter: 0n, validBefore: 1_767_225_600n });
    const v1 = encodePaymentHeader({ version: 1, ...signed });
    expect(v1.name).to.equal('X-PAYMENT');
    expect(decodeBase64Json(v1.value)).to.deep.equal({ x402Version: 1, scheme: 'exact', network: 'base', payload: { signature: signed.signature, authorization: signed.authorization } });
    const requirement = v2Req();
    const resource = { url: 'https://seller.example.com/r', description: 'r', mimeType: 'application/json' };
    const v2 = encodePaymentHeader({ version: 2, ...signed, requirement, resource });
    expect(v2.name).to.equal('PAYMENT-SIGNATURE');
    expect(decodeBase64Json(v2.value)).to.deep.equal({ x402Version: 2, resource, accepted: requirement, payload: { signature: signed.signature, authorization: signed.authorization } });
  });
});

describe('x402 challenges', () => {
  it('reads a v1 JSON body and picks the USDC-on-Base requirement', () => {
    const challenge = parseChallenge({ body: { x402Version: 1, error: 'pay', accepts: [v1Req({ asset: '0x4200000000000000000000000000000000000006' }), v1Req()] } });
    expect(challenge).to.include({ version: 1, error: 'pay' });
    const choice = chooseRequirement(challenge!);
    expect(choice.readable).to.have.length(2);
    expect(choice.supported).to.include({ version: 1, network: 'base', amount: 10_000n, payTo: PAY_TO, maxTimeoutSeconds: 60 });
  });

  it('prefers a valid v2 PAYMENT-REQUIRED header over the body', () => {
    const header = encodeBase64Json({ x402Version: 2, resource: { url: 'https://s.example.com/x' }, accepts: [v2Req({ amount: '250000' })] });
    const challenge = parseChallenge({ paymentRequiredHeader: header, body: { x402Version: 1, accepts: [v1Req()] } });
    expect(challenge?.version).to.equal(2);
    expect(challenge?.resource).to.deep.equal({ url: 'https://s.example.com/x' });
    expect(chooseRequirement(challenge!).supported?.amount).to.equal(250_000n);
    expect(parseChallenge({ paymentRequiredHeader: 'not base64 json', body: { x402Version: 1, accepts: [v1Req()] } })?.version).to.equal(1);
  });

  it('answers null when there is no challenge', () => {
    expect(parseChallenge({ body: { error: 'nope' } })).to.equal(null);
    expect(parseChallenge({ body: { x402Version: 1, accepts: [] } })).to.equal(null);
    expect(parseChallenge({ paymentRequiredHeader: encodeBase64Json({ accepts: 'x' }) })).to.equal(null);
  });

  it('refuses other schemes, networks and assets with a reason', () => {
    const read = (raw: Record<string, unknown>) => {
      const r = readRequirement(raw);
      if ('problems' in r) throw new Error(r.problems.join());
      return r;
    };
    expect(unsupportedReason(read(v1Req()))).to.equal(null);
    expect(unsupportedReason(read(v2Req()))).to.equal(null);
    expect(unsupportedReason(read(v1Req({ scheme: 'upto' })))).to.match(/scheme upto/);
    expect(unsupportedReason(read(v1Req({ network: 'base-sepolia' })))).to.match(/network base-sepolia/);
    expect(unsupportedReason(read(v2Req({ network: 'eip155:1' })))).to.match(/network eip155:1/);
    expect(unsupportedReason(read(v2Req({ asset: '0x4200000000000000000000000000000000000006' })))).to.match(/not USDC/);
    expect(unsupportedReason(read(v2Req({ amount: '0' })))).to.match(/greater than zero/);
    expect(readRequirement({ scheme: 'exact', network: 'base', payTo: 'nope' }))
      .to.have.property('problems')
      .with.length.greaterThan(1);
  });

  it('reads settlement from X-PAYMENT-RESPONSE or PAYMENT-RESPONSE', () => {
    expect(readSettlement({ 'x-payment-response': encodeBase64Json({ success: true, transaction: '0xabc', network: 'base' }) })).to.deep.equal({ settled: true, transaction: '0xabc' });
    expect(readSettlement({ 'payment-response': encodeBase64Json({ success: false, errorReason: 'x' }) })).to.deep.equal({ settled: false, transaction: null });
    expect(readSettlement({})).to.deep.equal({ settled: false, transaction: null });
  });
});
