// x402 from an agent account (issue 24, docs/CUSTODY.md): a contract wallet cannot sign EIP-3009, so its lane
// registers the authorization on chain (`authorizeX402`, counted toward the owner's caps there) and the account
// then answers the token's ERC-1271 question for that digest only, until valid_before. The registration is sent by
// the relayer and mined before the payment header leaves this service: the seller's facilitator checks it at once.
import { laneCall } from '../../chain/accounts.js';
import type { Address, CustodyPort, Hex } from '../../chain/port.js';
import type { Knex } from '../../db/knex.js';
import { ApiError } from '../../lib/errors.js';
import { apiCodeOf } from '../custody/accounts.js';

export interface X402Registration {
  token: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/**
 * Registers `auth` with the agent's account through its lane and waits for it to be mined. A refusal found by the
 * eth_call (a cap, a payee, the pause) throws: nothing was sent, so the caller's transaction rolls back whole. A
 * registration mined but reverted returns its refusal: the relayer's nonce is spent on chain, so the caller must
 * commit (finishing its operation as failed) rather than roll back.
 */
export async function registerWithAccount(
  db: Knex,
  custody: CustodyPort,
  wallet: { agentId: string; address: Address; sealedLaneKey: string },
  auth: X402Registration,
): Promise<{ ok: true; txHash: Hex } | { ok: false; code: string; message: string; txHash: Hex }> {
  const inner = laneCall.authorizeX402(auth.token, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce);
  const sent = await custody.sendLaneNow(db, wallet, inner);
  if (sent.ok) return sent;
  if (sent.txHash === null) throw new ApiError(apiCodeOf(sent.code), sent.message, { chain_code: sent.code });
  return { ok: false, code: sent.code, message: sent.message, txHash: sent.txHash };
}
