// contracts/PasskeyOwner.sol on Anvil (issue 27): a passkey's ERC-1271 signer, deployed by its factory at the CREATE2
// address of its P-256 key, accepts a WebAuthn assertion whose challenge is the hash, made here by a software P-256 key
// (node:crypto) in the shape authenticators produce, and refuses a tampered clientDataJSON, another key, a high s, a
// missing user verification, another challenge, and any answer from the bare implementation.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { getAddress, keccak256, toHex, type Hex } from 'viem';
import { passkeyOwnerAbi } from '../../contracts/artifacts/PasskeyOwner.js';
import { passkeyOwnerFactoryAbi, passkeyOwnerFactoryBytecode } from '../../contracts/artifacts/PasskeyOwnerFactory.js';
import type { Address } from '../../src/chain/port.js';
import { deployContract, waitMined } from '../../src/chain/token.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { createSoftAuthenticator } from '../support/webauthn.js';
import { encodeWebAuthnSignature, P256_N, derToRs } from '../support/webauthn-signature.js';

const MAGIC = '0x1626ba7e';
const INVALID = '0xffffffff';

describe('PasskeyOwner: a passkey as an ERC-1271 signer (issue 27)', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let factory: Address;
  const passkey = createSoftAuthenticator('localhost', 'http://localhost:3000');
  const other = createSoftAuthenticator('localhost', 'http://localhost:3000');
  let signer: Address;

  before(async () => {
    node = await startAnvil();
    const wallet = node.devWallet(0);
    factory = await deployContract(wallet, node.client, { abi: passkeyOwnerFactoryAbi, bytecode: passkeyOwnerFactoryBytecode, account: wallet.account, chain: wallet.chain });
    const predicted = await node.client.readContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'predict', args: [passkey.publicKey.qx, passkey.publicKey.qy] });
    await waitMined(node.client, wallet.writeContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'create', args: [passkey.publicKey.qx, passkey.publicKey.qy] }));
    signer = getAddress(predicted) as Address;
    // Idempotent: a second create returns the same signer and changes nothing.
    await waitMined(node.client, wallet.writeContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'create', args: [passkey.publicKey.qx, passkey.publicKey.qy] }));
  });
  after(async () => node?.stop());

  const check = (hash: Hex, signature: Hex, at: Address = signer) => node.client.readContract({ address: at, abi: passkeyOwnerAbi, functionName: 'isValidSignature', args: [hash, signature] });
  const digest = () => keccak256(randomBytes(32));

  it('is deployed at the address its key predicts and holds that key', async () => {
    expect(((await node.client.getCode({ address: signer })) ?? '0x').length).to.be.greaterThan(2);
    expect(await node.client.readContract({ address: signer, abi: passkeyOwnerAbi, functionName: 'publicKey' })).to.deep.equal([passkey.publicKey.qx, passkey.publicKey.qy]);
    const otherAddress = await node.client.readContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'predict', args: [other.publicKey.qx, other.publicKey.qy] });
    expect(otherAddress).to.not.equal(signer);
  });

  it('accepts an assertion whose challenge is the hash', async () => {
    const hash = digest();
    expect(await check(hash, encodeWebAuthnSignature(passkey.signChallenge(Buffer.from(hash.slice(2), 'hex'))))).to.equal(MAGIC);
  });

  it('refuses a tampered clientDataJSON, another challenge, another key, a high s and no user verification', async () => {
    const hash = digest();
    const bytes = Buffer.from(hash.slice(2), 'hex');
    const good = passkey.signChallenge(bytes);
    // The origin edited after signing: the signed clientDataJSON hash no longer matches.
    const tampered = { ...good, clientDataJSON: good.clientDataJSON.replace('http://localhost:3000', 'http://evil.example') };
    expect(await check(hash, encodeWebAuthnSignature(tampered))).to.equal(INVALID);
    // A valid assertion of another hash.
    expect(await check(digest(), encodeWebAuthnSignature(good))).to.equal(INVALID);
    // Another passkey's valid assertion of the same hash.
    expect(await check(hash, encodeWebAuthnSignature(other.signChallenge(bytes)))).to.equal(INVALID);
    // The same signature with s in the upper half (malleable): OpenZeppelin's P256 refuses it.
    const { s } = derToRs(good.signature);
    const low = s <= P256_N / 2n ? s : P256_N - s;
    expect(await check(hash, encodeWebAuthnSignature(good, { s: P256_N - low }))).to.equal(INVALID);
    expect(await check(hash, encodeWebAuthnSignature(good, { s: low }))).to.equal(MAGIC);
    // User present but not verified (UV clear): owner actions need verification.
    expect(await check(hash, encodeWebAuthnSignature(passkey.signChallenge(bytes, { flags: 0x01 })))).to.equal(INVALID);
    // Not an encoded assertion at all.
    expect(await check(hash, toHex(randomBytes(65)))).to.equal(INVALID);
  });

  it('the implementation itself answers nothing valid, and an invalid key is refused at creation', async () => {
    const implementation = await node.client.readContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'implementation' });
    const hash = digest();
    expect(await check(hash, encodeWebAuthnSignature(passkey.signChallenge(Buffer.from(hash.slice(2), 'hex'))), implementation)).to.equal(INVALID);
    let refused: unknown = null;
    await node.client
      .simulateContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'create', args: [passkey.publicKey.qx, passkey.publicKey.qx], account: node.devWallet(0).account })
      .catch((err: unknown) => (refused = err));
    expect(String(refused)).to.contain('InvalidPublicKey');
  });
});
