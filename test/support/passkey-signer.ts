// A passkey signing an owner change's proposal (issue 27) as the console does: the EIP-712 digest of the 428
// answer's typed data is the WebAuthn challenge, and the assertion, ABI-encoded, is `owner_signature.signature`.
import { hashTypedData, hexToBytes } from 'viem';
import { typedDataOf } from '../../src/lib/typed-data-json.js';
import type { OwnerSignature } from '../../src/services/custody/accounts.js';
import type { SoftAuthenticator } from './webauthn.js';
import { encodeWebAuthnSignature } from './webauthn-signature.js';

/** The EIP-712 digest of a proposal's `typed_data` (JSON, integers as decimal strings). */
export const proposalDigest = (proposal: Record<string, unknown>) => hashTypedData(typedDataOf(proposal.typed_data as Record<string, unknown>));

export function signProposalWithPasskey(key: SoftAuthenticator, proposal: Record<string, unknown>): OwnerSignature {
  const assertion = key.signChallenge(hexToBytes(proposalDigest(proposal)));
  return {
    signature: encodeWebAuthnSignature(assertion),
    nonce: String(proposal.nonce),
    deadline: String(proposal.deadline),
    ...(proposal.unlock_at !== undefined ? { unlock_at: String(proposal.unlock_at) } : {}),
  };
}
