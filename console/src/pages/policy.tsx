// An agent's policy: edited as a form or as JSON (the two views of one draft), validated and saved through the owner
// API; the service's problems show at their fields and, all of them, under the JSON.
import { useState } from 'preact/hooks';
import { api, ApiFailure, asView, idempotency, ok, type paths } from '../api.js';
import { ActionForm, useLoad } from '../ui.js';
import { generalProblems, PolicyForm, type Policy } from './policy-form.js';
import { replayPolicy, ReplayView, type ReplayResult } from './replay.js';
import { withStepUp } from '../step-up.js';
import { withPasskeySignature } from '../passkey-sign.js';

/** The body PUT …/policy and POST …/policy/validate take (the policy file format). */
type PolicyBody = paths['/v1/owner/agents/{agent_id}/policy']['put']['requestBody']['content']['application/json'];

/**
 * `readOnly`: the agent's account on chain holds the policy (evm mode) and the owner's key signs it, not this console;
 * `signWith`: the credential id of the passkey that owns the account, which signs the saved policy (issue 27).
 */
export function PolicyEditor({ id, readOnly = false, signWith = null, onShadowChange }: { id: string; readOnly?: boolean; signWith?: string | null; onShadowChange?: () => void }) {
  const current = useLoad(async () => asView<{ policy: Policy | null }>(await ok(api.GET('/v1/owner/agents/{agent_id}/policy', { params: { path: { agent_id: id } } }))), [id]);
  const [draft, setDraft] = useState<Policy | null>(null);
  const [text, setText] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const [replay, setReplay] = useState<ReplayResult | null>(null);
  const shown: Policy = draft ?? current.data?.policy ?? { operation_types: [] };
  const value = text ?? JSON.stringify(shown, null, 2);
  const general = generalProblems(problems);
  const parse = (): PolicyBody => {
    try {
      return JSON.parse(value) as PolicyBody;
    } catch {
      setProblems(['The policy is not valid JSON.']);
      throw new Error('The policy is not valid JSON.');
    }
  };
  return (
    <>
      <h2>Policy</h2>
      {current.error && (
        <p class="status error" role="alert">
          {current.error}
        </p>
      )}
      <PolicyForm
        policy={shown}
        problems={problems}
        onChange={(next) => {
          setDraft(next);
          setText(null);
        }}
      />
      {general.length > 0 && (
        <ul class="problems" aria-label="Problems with the policy">
          {general.map((p) => (
            <li>{p}</li>
          ))}
        </ul>
      )}
      <div class="field json">
        <label for="policy">Policy (JSON, contract §9 keys)</label>
        <textarea
          id="policy"
          rows={10}
          value={value}
          aria-invalid={problems.length > 0}
          aria-describedby="policy-problems"
          onInput={(e) => {
            const edited = (e.target as HTMLTextAreaElement).value;
            setText(edited);
            // The form follows the JSON while it parses to an object.
            try {
              const parsed: unknown = JSON.parse(edited);
              if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) setDraft(parsed as Policy);
            } catch {
              /* the text keeps what was typed; Validate says what is wrong */
            }
          }}
        />
        <ul id="policy-problems" class="problems" aria-live="polite">
          {problems.map((p) => (
            <li>{p}</li>
          ))}
        </ul>
      </div>
      <div class="row">
        <ActionForm
          label="Validate"
          action={async () => {
            const res = asView<{ valid: boolean; problems: string[] }>(await ok(api.POST('/v1/owner/agents/{agent_id}/policy/validate', { params: { path: { agent_id: id } }, body: parse() })));
            setProblems(res.problems);
            return res.valid ? 'The policy is valid.' : '';
          }}
        />
        <ActionForm
          label="Replay last 30 days"
          action={async () => {
            setReplay(await replayPolicy(id, parse()));
            return '';
          }}
        />
        <ActionForm
          label="Set as shadow policy"
          action={async () => {
            await ok(api.PUT('/v1/owner/agents/{agent_id}/shadow-policy', { params: { path: { agent_id: id }, header: idempotency() }, body: parse() }));
            onShadowChange?.();
            return 'Shadow policy set: every write is also evaluated against it.';
          }}
        />
        {!readOnly && (
          <ActionForm
            label="Save policy"
            action={async () => {
              try {
                const body = parse();
                const res = asView<{ policy: Policy }>(
                  await withPasskeySignature(signWith, 'SetPolicy', (signature) =>
                    withStepUp((stepUp) =>
                      ok(
                        api.PUT('/v1/owner/agents/{agent_id}/policy', {
                          params: { path: { agent_id: id }, header: { ...idempotency(), ...stepUp } },
                          body: signature ? { ...body, owner_signature: signature } : body,
                        }),
                      ),
                    ),
                  ),
                );
                setProblems([]);
                setDraft(res.policy);
                setText(null);
                return 'Policy saved.';
              } catch (err) {
                const problems = err instanceof ApiFailure ? err.error.details?.problems : undefined;
                if (Array.isArray(problems)) setProblems(problems.map(String));
                throw err;
              }
            }}
          />
        )}
      </div>
      {readOnly && (
        <p class="status">
          This policy is held by the agent's account on chain: edit and validate it here, then sign it with <code>agentctl agent set-policy</code> (the command is under On-chain limits).
        </p>
      )}
      {replay && <ReplayView result={replay} />}
    </>
  );
}
