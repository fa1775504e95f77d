// Policy replay and the shadow policy on an agent's page (issue 28): what a candidate policy would have decided over
// the agent's history (daily spend under the recorded and the candidate policy against the cap, the operations
// whose outcome changes), and the shadow policy with the writes on which it differs from the live one.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, idempotency, ok, type Schemas } from '../api.js';
import { ActionForm, Status, Table, useLoad, when } from '../ui.js';
import { withStepUp } from '../step-up.js';

export type ReplayResult = Schemas['PolicyReplayResult'];
type Policy = Schemas['PolicyDocument'];

const outcome = (o: { allowed: boolean; code: string | null; key: string | null }) => (o.allowed ? 'allowed' : `refused: ${o.code}${o.key ? ` (${o.key})` : ''}`);

/** Daily spend, recorded and candidate, against the cap (per day when the candidate's period is a day). */
function SpendChart({ result }: { result: ReplayResult }) {
  const host = useRef<HTMLDivElement>(null);
  const days = result.days;
  const cap = result.periods.find((p) => p.cap_usd !== null)?.cap_usd ?? null;
  const daily = (result.policy as { period?: string }).period === 'day';
  useEffect(() => {
    const el = host.current;
    if (!el || days.length === 0) return;
    // Every day of the window, a day without writes at zero.
    const byDay = new Map(days.map((d) => [d.date, d]));
    const first = Date.parse(`${result.since.slice(0, 10)}T00:00:00Z`);
    const xs: number[] = [];
    for (let t = first; t <= Date.parse(result.until); t += 86_400_000) xs.push(t / 1000);
    const at = (x: number, f: 'recorded_usd' | 'candidate_usd') => Number(byDay.get(new Date(x * 1000).toISOString().slice(0, 10))?.[f] ?? 0);
    const series: uPlot.Series[] = [{}, { label: 'Recorded', stroke: '#5a6472', width: 2 }, { label: 'Candidate', stroke: '#0b57d0', width: 2 }];
    const data: number[][] = [xs, xs.map((x) => at(x, 'recorded_usd')), xs.map((x) => at(x, 'candidate_usd'))];
    if (cap !== null && daily) {
      series.push({ label: 'Daily cap', stroke: '#b3261e', width: 1, dash: [6, 4] });
      data.push(xs.map(() => Number(cap)));
    }
    const top = Math.max(1, ...data.slice(1).flat()) * 1.1;
    const width = Math.max(280, Math.min(el.clientWidth || 640, 900));
    const plot = new uPlot({ width, height: 240, series, legend: { show: false }, axes: [{}, { label: 'USD' }], scales: { x: { time: true }, y: { range: [0, top] } } }, data as uPlot.AlignedData, el);
    return () => plot.destroy();
  }, [result]);
  if (days.length === 0) return <p class="empty">No write in the replayed window.</p>;
  const totals = days.reduce((t, d) => ({ recorded: t.recorded + Number(d.recorded_usd), candidate: t.candidate + Number(d.candidate_usd) }), { recorded: 0, candidate: 0 });
  return (
    <figure class="chart">
      <div
        ref={host}
        role="img"
        aria-label={`Daily spend over ${days.length} days: ${totals.recorded.toFixed(2)} USD recorded, ${totals.candidate.toFixed(2)} USD under the candidate${cap !== null ? `, cap ${cap} USD a ${(result.policy as { period?: string }).period}` : ''}.`}
      />
      <figcaption>
        Daily spend in USD: <span class="key recorded">recorded</span>, <span class="key candidate">candidate</span>
        {cap !== null && daily && (
          <>
            , <span class="key cap">daily cap {cap}</span>
          </>
        )}
        .
      </figcaption>
    </figure>
  );
}

export function ReplayView({ result }: { result: ReplayResult }) {
  const changed = result.operations.filter((o) => o.change !== 'unchanged');
  return (
    <div class="replay" aria-label="Policy replay">
      <h3>Replay since {when(result.since)}</h3>
      <p role="status">
        {result.counts.operations} writes: {result.counts.unchanged} unchanged, {result.counts.newly_refused} newly refused, {result.counts.newly_allowed} newly allowed.
      </p>
      <SpendChart result={result} />
      <Table
        caption="Writes whose outcome changes"
        head={['When', 'Type', 'USD', 'Recorded', 'Candidate', 'Used in period before']}
        rows={changed.map((o) => [when(o.created_at), o.type, o.amount_usd ?? '—', outcome(o.recorded), outcome(o.candidate), o.usage.period_usd])}
        empty="No write changes outcome under this policy."
      />
    </div>
  );
}

/** The replay of the policy being edited over the last `days` days. */
export async function replayPolicy(agentId: string, policy: Policy, days = 30): Promise<ReplayResult> {
  const since = new Date(Date.now() - days * 86_400_000).toISOString();
  return ok(api.POST('/v1/owner/agents/{agent_id}/policy/replay', { params: { path: { agent_id: agentId } }, body: { policy, since } }));
}

export function ShadowPolicy({ id, readOnly = false, version, onChange }: { id: string; readOnly?: boolean; version: number; onChange: () => void }) {
  const shadow = useLoad(() => ok(api.GET('/v1/owner/agents/{agent_id}/shadow-policy', { params: { path: { agent_id: id } } })), [id, version]);
  const decisions = useLoad(() => ok(api.GET('/v1/owner/agents/{agent_id}/shadow-decisions', { params: { path: { agent_id: id }, query: { limit: 100 } } })), [id, version]);
  const policy = shadow.data?.shadow_policy ?? null;
  return (
    <>
      <h2>Shadow policy</h2>
      <Status text={shadow.error ?? decisions.error} kind="error" />
      {policy === null ? (
        <p class="empty">No shadow policy. Set one from the policy editor to see what it would decide beside the live policy.</p>
      ) : (
        <>
          <pre class="policy" aria-label="Shadow policy">
            {JSON.stringify(policy, null, 2)}
          </pre>
          <div class="row">
            {!readOnly && (
              <ActionForm
                label="Promote to live policy"
                action={async () => {
                  await withStepUp((stepUp) =>
                    ok(api.POST('/v1/owner/agents/{agent_id}/shadow-policy/promote', { params: { path: { agent_id: id }, header: { ...idempotency(), ...stepUp } }, body: {} })),
                  );
                  onChange();
                  return 'The shadow policy is now the live policy.';
                }}
              />
            )}
            <ActionForm
              label="Drop shadow policy"
              danger
              action={async () => {
                await ok(api.DELETE('/v1/owner/agents/{agent_id}/shadow-policy', { params: { path: { agent_id: id }, header: idempotency() } }));
                onChange();
                return 'Shadow policy dropped.';
              }}
            />
          </div>
        </>
      )}
      <Table
        caption="Writes the shadow policy decides differently"
        head={['When', 'Type', 'USD', 'Live', 'Shadow']}
        rows={(decisions.data?.decisions ?? []).map((d) => [when(d.created_at), d.operation_type, d.amount_usd ?? '—', outcome(d.live), outcome(d.shadow)])}
        empty="No differing decision recorded."
      />
    </>
  );
}
