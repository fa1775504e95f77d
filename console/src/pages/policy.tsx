// An agent's policy: edited as JSON, validated and saved through the owner API.
import { useState } from 'preact/hooks';
import { api, ApiFailure, asView, idempotency, ok, type paths } from '../api.js';
import { ActionForm, useLoad } from '../ui.js';
import { replayPolicy, ReplayView, type ReplayResult } from './replay.js';

type Policy = paths['/v1/owner/agents/{agent_id}/policy']['put']['requestBody']['content']['application/json'];

export function PolicyEditor({ id, onShadowChange }: { id: string; onShadowChange?: () => void }) {
  const current = useLoad(async () => asView<{ policy: Policy }>(await ok(api.GET('/v1/owner/agents/{agent_id}/policy', { params: { path: { agent_id: id } } }))), [id]);
  const [text, setText] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const [replay, setReplay] = useState<ReplayResult | null>(null);
  const value = text ?? JSON.stringify(current.data?.policy ?? { operation_types: [] }, null, 2);
  const parse = (): Policy => {
    try {
      return JSON.parse(value) as Policy;
    } catch {
      setProblems(['The policy is not valid JSON.']);
      throw new Error('The policy is not valid JSON.');
    }
  };
  return (
    <>
      <h2>Policy</h2>
      <div class="field">
        <label for="policy">Policy (JSON, contract §9 keys)</label>
        <textarea id="policy" rows={10} value={value} aria-invalid={problems.length > 0} aria-describedby="policy-problems" onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
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
        <ActionForm
          label="Save policy"
          action={async () => {
            try {
              const res = asView<{ policy: Policy }>(await ok(api.PUT('/v1/owner/agents/{agent_id}/policy', { params: { path: { agent_id: id }, header: idempotency() }, body: parse() })));
              setProblems([]);
              setText(JSON.stringify(res.policy, null, 2));
              return 'Policy saved.';
            } catch (err) {
              const problems = err instanceof ApiFailure ? err.error.details?.problems : undefined;
              if (Array.isArray(problems)) setProblems(problems.map(String));
              throw err;
            }
          }}
        />
      </div>
      {replay && <ReplayView result={replay} />}
    </>
  );
}
