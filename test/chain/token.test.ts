// The token contract on a real Anvil: deployment, minting by the deployer only, EIP-3009 transfers signed by viem
// and relayed by another account, replay refusal, and the EIP-712 domain the @x402/evm scheme expects.
import { expect } from 'chai';
import { authorizationTypes } from '@x402/evm';
import { parseSignature, parseUnits, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { randomBytes } from 'node:crypto';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import { deployToken, mintToken, tokenDomain, transferWithAuthorizationTypes, usdCoinAbi } from '../../src/chain/token.js';
import type { Address } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';

describe('UsdCoin token on Anvil', function () {
  this.timeout(60_000);
  let node: AnvilNode;
  let token: Address;

  before(async () => {
    node = await startAnvil();
    token = await deployToken(node.devWallet(0), node.client);
  });
  after(async () => node?.stop());

  it('has the dev account addresses derived from the well-known keys', () => {
    expect(privateKeyToAccount(ANVIL_DEV_KEYS[0]!).address).to.equal('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266');
  });

  it('reports the USDC EIP-712 domain and 6 decimals', async () => {
    const [, name, version, chainId, verifyingContract] = await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'eip712Domain' });
    expect({ name, version, chainId, verifyingContract }).to.deep.equal({ name: 'USD Coin', version: '2', chainId: 31337n, verifyingContract: token });
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'decimals' })).to.equal(6);
    expect(transferWithAuthorizationTypes).to.deep.equal(authorizationTypes);
  });

  it('refuses a mint from anyone but the deployer', async () => {
    const other = node.devWallet(1);
    let error: unknown;
    try {
      await mintToken(other, node.client, token, other.account.address, 1n);
    } catch (err) {
      error = err;
    }
    expect(String(error)).to.match(/OwnableUnauthorizedAccount/);
  });

  it('moves tokens by transferWithAuthorization signed by a holder without ETH and relayed by another account', async () => {
    const holder = privateKeyToAccount(generatePrivateKey());
    const payee = privateKeyToAccount(generatePrivateKey()).address;
    await mintToken(node.devWallet(0), node.client, token, holder.address, parseUnits('100', 6));
    const now = BigInt(Math.floor(Date.now() / 1000));
    const message = { from: holder.address, to: payee, value: parseUnits('12.5', 6), validAfter: 0n, validBefore: now + 3600n, nonce: toHex(randomBytes(32)) };
    const signature = await holder.signTypedData({ domain: tokenDomain(31337, token), types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message });
    const { v, r, s } = parseSignature(signature);
    const relayer = node.devWallet(1);
    const args = [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, Number(v), r, s] as const;
    const hash = await relayer.writeContract({ address: token, abi: usdCoinAbi, functionName: 'transferWithAuthorization', args });
    const receipt = await node.client.waitForTransactionReceipt({ hash });
    expect(receipt.status).to.equal('success');
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'balanceOf', args: [payee] })).to.equal(12_500_000n);
    expect(await node.client.getBalance({ address: holder.address })).to.equal(0n);
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'authorizationState', args: [holder.address, message.nonce] })).to.equal(true);
    const used = await node.client.getContractEvents({ address: token, abi: usdCoinAbi, eventName: 'AuthorizationUsed', fromBlock: receipt.blockNumber, toBlock: receipt.blockNumber });
    expect(used.map((l) => l.args)).to.deep.equal([{ authorizer: holder.address, nonce: message.nonce }]);

    // The same authorization again is refused (replay).
    let error: unknown;
    try {
      await node.client.simulateContract({ address: token, abi: usdCoinAbi, functionName: 'transferWithAuthorization', args, account: relayer.account });
    } catch (err) {
      error = err;
    }
    expect(String(error)).to.match(/AuthorizationUsedOrCanceled/);
  });
});
