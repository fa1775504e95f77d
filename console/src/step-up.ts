// The console's step-up (issue 27): a key rotation or a policy change by an owner who has a passkey answers 428
// `step_up_required` until the same request carries a fresh assertion of that passkey in `X-Passkey-Assertion`. The
// assertion's challenge is asked for this action on this agent (`purpose: step_up`, the 428's details), so it can
// approve nothing else, and is single use.
import { startAuthentication, type PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/browser';
import { api, ApiFailure, idempotency, ok, type Schemas } from './api.js';

/** The header of a step-up: the assertion JSON, base64url-encoded. */
export type StepUpHeader = { 'X-Passkey-Assertion'?: string };

const base64url = (text: string) =>
  btoa(String.fromCharCode(...new TextEncoder().encode(text)))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** Runs `attempt`; when the service asks for a step-up, asks the owner's passkey and runs it again with the assertion. */
export async function withStepUp<T>(attempt: (header: StepUpHeader) => Promise<T>): Promise<T> {
  try {
    return await attempt({});
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.error.code !== 'step_up_required' || !err.error.details) throw err;
    const asked = err.error.details as Schemas['StepUpChallenge'];
    const { options } = await ok(api.POST('/v1/owner/passkeys/assertion-options', { params: { header: idempotency() }, body: { purpose: 'step_up', action: asked.action, agent_id: asked.agent_id } }));
    const assertion = await startAuthentication({ optionsJSON: options as unknown as PublicKeyCredentialRequestOptionsJSON });
    return attempt({ 'X-Passkey-Assertion': base64url(JSON.stringify(assertion)) });
  }
}
