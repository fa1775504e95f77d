// Custody tests: lane calls as an attacker who holds what the server holds would send them, straight to the chain.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { decodeErrorResult, type Hex as ViemHex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { relayLaneCallData } from '../../src/chain/accounts.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { createSealer } from '../../src/lib/crypto.js';
import type { AnvilNode } from './anvil.js';

/** The lane key the server holds for a wallet, opened as an attacker with the database dump and MASTER_KEY would. */
export async function serverLaneKey(s: { db: Knex; config: { masterKey: string } }, walletId: string): Promise<PrivateKeyAccount> {
  const wallet = await s.db('wallets').where({ id: walletId }).first();
  return privateKeyToAccount(createSealer(s.config.masterKey).open(String(wallet.sealed_private_key)) as Hex);
}

/**
 * A lane call signed by `lane` and relayed by a dev account: null when the account would accept it, else the
 * account's custom error. With `mine` (the default) the reverting transaction is also mined, and must revert.
 */
export async function laneRevert(node: AnvilNode, account: Address, lane: PrivateKeyAccount, inner: Hex, opts: { mine?: boolean } = {}): Promise<string | null> {
  const data = await relayLaneCallData(lane, 31337, account, inner, `0x${randomUUID().replace(/-/g, '').padEnd(64, '0')}` as Hex, 2n ** 40n);
  const sender = node.devWallet(3);
  try {
    await node.client.call({ account: sender.account.address, to: account, data });
    return null;
  } catch (err) {
    if (opts.mine ?? true) {
      const hash = await sender.sendTransaction({ to: account, data, gas: 1_000_000n });
      expect((await node.client.waitForTransactionReceipt({ hash })).status).to.equal('reverted');
    }
    for (let e = err as { data?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
      if (typeof e.data === 'string' && e.data.length >= 10) return decodeErrorResult({ abi: agentAccountAbi, data: e.data as ViemHex }).errorName;
    }
    return String((err as Error).message).split('\n')[0]!;
  }
}
