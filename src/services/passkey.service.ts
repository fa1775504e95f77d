// Owners' passkeys (issue 27): WebAuthn registration and assertion ceremonies through @simplewebauthn/server. An
// assertion is verified against a challenge this service issued, single use, at most CHALLENGE_TTL_MS old and bound
// to its purpose: signing in, or approving one operation (the step-up that approve requires, so "fresh" means
// verified within the challenge's 5 minutes and for that approval alone).
import { createRequire } from 'node:module';
import type * as SimpleWebAuthn from '@simplewebauthn/server';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type * as SimpleWebAuthnHelpers from '@simplewebauthn/server/helpers';
import type { Db } from '../db/knex.js';
import {
  consumeChallenge,
  findOwnerEmail,
  findOwnerPasskey,
  findPasskey,
  hasPasskey,
  insertChallenge,
  insertPasskey,
  listPasskeys,
  recordPasskeyUse,
  type ChallengePurpose,
  type PasskeyRow,
} from '../db/repositories/passkey.repository.js';
import { uniqueViolationOf } from '../db/unique-violation.js';
import type { Clock } from '../lib/clock.js';
import type { Schema } from '../lib/contract.js';
import { ApiError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';

/** How long a ceremony's challenge stays usable: the step-up window of an approval. */
export const CHALLENGE_TTL_MS = 5 * 60 * 1000;

export type PasskeyView = Schema<'Passkey'>;
export interface CeremonyOptions {
  options: Record<string, unknown>;
  expires_at: string;
}

/** A passkey as an onchain signer (issue 27): its P-256 public key's coordinates, 32 bytes each. */
export interface PasskeySignerKey {
  id: string;
  credentialId: string;
  name: string;
  qx: `0x${string}`;
  qy: `0x${string}`;
}

export interface PasskeyService {
  registrationOptions(db: Db, ownerId: string): Promise<CeremonyOptions>;
  register(db: Db, ownerId: string, name: string, response: unknown): Promise<PasskeyView>;
  list(db: Db, ownerId: string): Promise<PasskeyView[]>;
  /**
   * Options for an assertion: `sign_in` (any owner's discoverable passkey), `approve` (the owner's, for one
   * operation) or `step_up` (the owner's, for one action on one agent: a key rotation or a policy change).
   */
  assertionOptions(db: Db, request: AssertionPurpose): Promise<CeremonyOptions>;
  /** The owner's passkey `passkeyId` with its P-256 key (the PasskeyOwner contract's); not_found, or validation_failed when the key is not ES256. */
  signerKey(db: Db, ownerId: string, passkeyId: string): Promise<PasskeySignerKey>;
  /** Verifies an assertion for `expect`; the owner and passkey it proves. Throws authentication_failed otherwise. */
  verifyAssertion(db: Db, response: unknown, expect: AssertionPurpose): Promise<{ ownerId: string; passkeyId: string; credentialId: string }>;
  /** Whether the owner has a passkey: then key rotations and policy changes in the console need a step-up. */
  hasPasskey(db: Db, ownerId: string): Promise<boolean>;
}

/** The owner actions a console session performs only after a fresh assertion (issue 27). */
export const STEP_UP_ACTIONS = ['rotate_agent_key', 'rotate_lane_key', 'replace_policy', 'promote_shadow_policy'] as const;
export type StepUpAction = (typeof STEP_UP_ACTIONS)[number];

/** What an assertion is for. */
export type AssertionPurpose = { purpose: 'sign_in' } | { purpose: 'approve'; ownerId: string; operationId: string } | { purpose: 'step_up'; ownerId: string; action: StepUpAction; agentId: string };

/** The owner an assertion must prove, and what the challenge is bound to (an operation, or an action on an agent). */
function bindingOf(p: AssertionPurpose): { ownerId: string | null; operationId: string | null; scope: string | null } {
  if (p.purpose === 'approve') return { ownerId: p.ownerId, operationId: p.operationId, scope: null };
  if (p.purpose === 'step_up') return { ownerId: p.ownerId, operationId: null, scope: `${p.action}:${p.agentId}` };
  return { ownerId: null, operationId: null, scope: null };
}

/**
 * @simplewebauthn/server (with @peculiar/asn1-*, asn1js and tsyringe, ~3.5 MB of heap) loads at the first passkey ceremony,
 * not at start (the start-up footprint, issue 12 P4); Node's require cache keeps the one copy (no state of ours).
 */
const load = createRequire(import.meta.url);
const webauthn = () => load('@simplewebauthn/server') as typeof SimpleWebAuthn;
const webauthnHelpers = () => load('@simplewebauthn/server/helpers') as typeof SimpleWebAuthnHelpers;

const denied = (why: string) => new ApiError('authentication_failed', `the passkey assertion was refused: ${why}`);

/** The challenge a WebAuthn answer signed (clientDataJSON.challenge), or null when unreadable. */
function challengeOf(response: unknown): string | null {
  const encoded = (response as { response?: { clientDataJSON?: unknown } } | null)?.response?.clientDataJSON;
  if (typeof encoded !== 'string' || encoded.length > 4096) return null;
  try {
    const parsed = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as { challenge?: unknown };
    return typeof parsed.challenge === 'string' ? parsed.challenge : null;
  } catch {
    return null;
  }
}

/** The (x, y) of a COSE EC2 P-256 key (ES256), or null for any other kind of key (RSA, Ed25519, another curve). */
export function p256Coordinates(publicKey: Uint8Array): { qx: `0x${string}`; qy: `0x${string}` } | null {
  const { cose, decodeCredentialPublicKey } = webauthnHelpers();
  let key: SimpleWebAuthnHelpers.cose.COSEPublicKey;
  try {
    key = decodeCredentialPublicKey(publicKey as Parameters<typeof decodeCredentialPublicKey>[0]);
  } catch {
    return null;
  }
  if (!cose.isCOSEPublicKeyEC2(key) || key.get(cose.COSEKEYS.alg) !== cose.COSEALG.ES256 || key.get(cose.COSEKEYS.crv) !== cose.COSECRV.P256) return null;
  const x = key.get(cose.COSEKEYS.x);
  const y = key.get(cose.COSEKEYS.y);
  if (!x || !y || x.length !== 32 || y.length !== 32) return null;
  return { qx: `0x${Buffer.from(x).toString('hex')}`, qy: `0x${Buffer.from(y).toString('hex')}` };
}

const view = (p: PasskeyRow): PasskeyView => ({ id: p.id, name: p.name, created_at: p.created_at.toISOString(), last_used_at: p.last_used_at?.toISOString() ?? null });

export function createPasskeyService(deps: { clock: Clock; baseUrl: string; rpId: string; rpName?: string }): PasskeyService {
  const { clock, rpId } = deps;
  const base = new URL(deps.baseUrl);
  // BASE_URL's origin, and the same scheme and port under the RP id's name (src/config.ts webauthnRpId).
  const origins = [...new Set([base.origin, `${base.protocol}//${rpId}${base.port ? `:${base.port}` : ''}`])];
  const rpName = deps.rpName ?? 'Agent API';

  async function issue(db: Db, purpose: ChallengePurpose, challenge: string, binding: ReturnType<typeof bindingOf>) {
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + CHALLENGE_TTL_MS);
    await insertChallenge(db, { id: newId(), owner_id: binding.ownerId, purpose, challenge, operation_id: binding.operationId, scope: binding.scope, created_at: now, expires_at: expiresAt });
    return expiresAt.toISOString();
  }

  return {
    async registrationOptions(db, ownerId) {
      const email = await findOwnerEmail(db, ownerId);
      if (!email) throw new ApiError('not_found', 'owner not found');
      const existing = await listPasskeys(db, ownerId);
      const options = await webauthn().generateRegistrationOptions({
        rpName,
        rpID: rpId,
        userName: email,
        userID: Buffer.from(ownerId.replace(/-/g, ''), 'hex'),
        attestationType: 'none',
        // ES256 first: a P-256 passkey can also own an agent account on chain (PasskeyOwner, issue 27); Ed25519 and
        // RS256 keys still sign in and step up.
        supportedAlgorithmIDs: [-7, -8, -257],
        excludeCredentials: existing.map((p) => ({ id: p.credential_id, transports: p.transports as never })),
        authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
        timeout: CHALLENGE_TTL_MS,
      });
      return { options: options as unknown as Record<string, unknown>, expires_at: await issue(db, 'register', options.challenge, { ownerId, operationId: null, scope: null }) };
    },

    async register(db, ownerId, name, response) {
      const challenge = challengeOf(response);
      const row = challenge ? await consumeChallenge(db, challenge, 'register', clock.now()) : undefined;
      if (!row || row.owner_id !== ownerId) throw new ApiError('validation_failed', 'the registration answers no live challenge of this owner: ask for new options', { field: 'response' });
      // Loaded before the try: a missing package is a failure of the server, not a refused registration.
      const { verifyRegistrationResponse } = webauthn();
      let verified;
      try {
        verified = await verifyRegistrationResponse({
          response: response as RegistrationResponseJSON,
          expectedChallenge: row.challenge,
          expectedOrigin: origins,
          expectedRPID: rpId,
          requireUserVerification: false,
        });
      } catch (err) {
        throw new ApiError('validation_failed', `the registration was refused: ${err instanceof Error ? err.message : String(err)}`, { field: 'response' });
      }
      if (!verified.verified || !verified.registrationInfo) throw new ApiError('validation_failed', 'the registration was refused', { field: 'response' });
      const { credential } = verified.registrationInfo;
      const now = clock.now();
      const id = newId();
      try {
        await insertPasskey(db, {
          id,
          owner_id: ownerId,
          credential_id: credential.id,
          public_key: Buffer.from(credential.publicKey),
          counter: credential.counter,
          transports: credential.transports ?? [],
          name,
          created_at: now,
        });
      } catch (err) {
        if (uniqueViolationOf(err)) throw new ApiError('invalid_state_transition', 'this passkey is already registered', { field: 'response' });
        throw err;
      }
      return { id, name, created_at: now.toISOString(), last_used_at: null };
    },

    list: async (db, ownerId) => (await listPasskeys(db, ownerId)).map(view),

    async assertionOptions(db, request) {
      const binding = bindingOf(request);
      const mine = binding.ownerId ? await listPasskeys(db, binding.ownerId) : [];
      if (binding.ownerId && mine.length === 0) throw new ApiError('invalid_state_transition', `register a passkey first: ${request.purpose === 'approve' ? 'approvals need' : 'a step-up needs'} one`);
      const options = await webauthn().generateAuthenticationOptions({
        rpID: rpId,
        // Signing in: any discoverable passkey of this site; approving: the owner's own.
        allowCredentials: mine.map((p) => ({ id: p.credential_id, transports: p.transports as never })),
        userVerification: 'preferred',
        timeout: CHALLENGE_TTL_MS,
      });
      const expires = await issue(db, request.purpose, options.challenge, binding);
      return { options: options as unknown as Record<string, unknown>, expires_at: expires };
    },

    async signerKey(db, ownerId, passkeyId) {
      const passkey = await findOwnerPasskey(db, ownerId, passkeyId);
      if (!passkey) throw new ApiError('not_found', "no such passkey of the agent's owner", { field: 'passkey_id' });
      const key = p256Coordinates(new Uint8Array(passkey.public_key));
      if (!key)
        throw new ApiError('validation_failed', 'this passkey is not a P-256 (ES256) key: only those can sign on chain', {
          errors: [{ location: 'body', path: '/passkey_id', message: 'is not an ES256 passkey' }],
        });
      return { id: passkey.id, credentialId: passkey.credential_id, name: passkey.name, ...key };
    },

    async verifyAssertion(db, response, expect) {
      const challenge = challengeOf(response);
      if (!challenge) throw denied('no challenge in the answer');
      // Consumed first: a refused answer cannot be retried with the same challenge either.
      const row = await consumeChallenge(db, challenge, expect.purpose, clock.now());
      if (!row) throw denied('the challenge is unknown, used or expired (5 minutes): ask for new options');
      const binding = bindingOf(expect);
      if (binding.ownerId && (row.owner_id !== binding.ownerId || row.operation_id !== binding.operationId || row.scope !== binding.scope))
        throw denied(`the challenge was issued for another ${expect.purpose === 'approve' ? 'approval' : 'action'}`);
      const id = (response as { id?: unknown }).id;
      const passkey = typeof id === 'string' ? await findPasskey(db, id) : undefined;
      if (!passkey) throw denied('unknown passkey');
      if (binding.ownerId && passkey.owner_id !== binding.ownerId) throw denied("the passkey is not the owner's");
      const { verifyAuthenticationResponse } = webauthn();
      let result;
      try {
        result = await verifyAuthenticationResponse({
          response: response as AuthenticationResponseJSON,
          expectedChallenge: row.challenge,
          expectedOrigin: origins,
          expectedRPID: rpId,
          credential: { id: passkey.credential_id, publicKey: new Uint8Array(passkey.public_key), counter: Number(passkey.counter), transports: passkey.transports as never },
          requireUserVerification: false,
        });
      } catch (err) {
        throw denied(err instanceof Error ? err.message : String(err));
      }
      if (!result.verified) throw denied('the signature does not verify');
      await recordPasskeyUse(db, passkey.id, result.authenticationInfo.newCounter, clock.now());
      return { ownerId: passkey.owner_id, passkeyId: passkey.id, credentialId: passkey.credential_id };
    },

    hasPasskey: (db, ownerId) => hasPasskey(db, ownerId),
  };
}
