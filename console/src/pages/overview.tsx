// The agents overview (issue 27): per agent its status, balances in USD and their total, what it may still spend this
// period and in total (meters against the caps), pending approvals and, in evm mode, its exposure; and an agent's USD
// spent per day over the last 30 days against the period cap (uplot, bundled).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, ok, type Schemas } from '../api.js';
import { amount, usd } from '../format.js';
import { Status, Table, useLoad } from '../ui.js';

type AgentOverview = Schemas['OwnerAgentOverview'];

/** Spent against a cap: a meter with its words (what is left), or "no cap". */
function Allowance({ label, cap, spent, left }: { label: string; cap: string | null; spent: string; left: string | null }) {
  if (cap === null) return <span class="allowance">{usd(spent)} spent, no cap</span>;
  return (
    <span class="allowance">
      <meter
        min={0}
        max={Number(cap)}
        value={Math.min(Number(spent), Number(cap))}
        low={Number(cap) * 0.7}
        high={Number(cap) * 0.9}
        optimum={0}
        aria-label={`${label}: ${usd(spent)} of ${usd(cap)} spent`}
      />
      <span>
        {usd(left)} left of {usd(cap)}
      </span>
    </span>
  );
}

export function Overview({ version }: { version: number }) {
  const { data, error } = useLoad(() => ok(api.GET('/v1/owner/overview', { params: { query: { limit: 100 } } })), [version]);
  const items = data?.items ?? [];
  const evm = items.some((a) => a.exposure_usd !== null);
  const head = ['Agent', 'Status', 'Balances', 'Total', 'Left this period', 'Left in total', 'Approvals', ...(evm ? ['Exposure if compromised'] : [])];
  return (
    <>
      <Status text={error} kind="error" />
      {data && (
        <p class="total">
          All agents together hold <strong>{usd(data.total_usd)}</strong>.
        </p>
      )}
      <Table
        caption="Your agents"
        head={head}
        rows={items.map((a: AgentOverview) => [
          <a href={`#/agents/${a.agent_id}`}>{a.name}</a>,
          <span class={`badge ${a.status}`}>{a.status}</span>,
          a.balances.length ? (
            <ul class="plain">
              {a.balances.map((b) => (
                <li>
                  {amount(b.amount, b.asset)} <small>{usd(b.value_usd)}</small>
                </li>
              ))}
            </ul>
          ) : (
            '0'
          ),
          usd(a.total_usd),
          <Allowance label={`${a.name} this ${a.period ?? 'day'}`} cap={a.per_period_usd} spent={a.period_spent_usd} left={a.period_remaining_usd} />,
          <Allowance label={`${a.name} in total`} cap={a.lifetime_usd} spent={a.lifetime_spent_usd} left={a.lifetime_remaining_usd} />,
          a.pending_approvals ? <a href="#/approvals">{a.pending_approvals} pending</a> : 'none',
          ...(evm ? [usd(a.exposure_usd)] : []),
        ])}
        empty="No agents yet."
      />
    </>
  );
}

/** USD spent per day over the last 30 days, with the daily cap as a dashed line (a week's or month's cap is named). */
export function SpendingChart({ id, version }: { id: string; version: number }) {
  const { data, error } = useLoad(() => ok(api.GET('/v1/owner/agents/{agent_id}/spending', { params: { path: { agent_id: id }, query: { days: 30 } } })), [id, version]);
  const host = useRef<HTMLDivElement>(null);
  const cap = data?.per_period_usd ?? null;
  const daily = data?.period === 'day' || data?.period === null;
  useEffect(() => {
    const el = host.current;
    if (!el || !data) return;
    const xs = data.days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000);
    const spent = data.days.map((d) => Number(d.spent_usd));
    const series: uPlot.Series[] = [{}, { label: 'Spent', stroke: '#0b57d0', fill: 'rgba(11, 87, 208, 0.35)', width: 1, paths: uPlot.paths.bars?.({ size: [0.7, 24] }), points: { show: false } }];
    const lines: number[][] = [xs, spent];
    if (cap !== null && daily) {
      series.push({ label: 'Daily cap', stroke: '#b3261e', width: 1, dash: [6, 4], points: { show: false } });
      lines.push(xs.map(() => Number(cap)));
    }
    const top = Math.max(1, ...lines.slice(1).flat()) * 1.1;
    const width = Math.max(280, Math.min(el.clientWidth || 640, 900));
    const plot = new uPlot(
      { width, height: 220, series, legend: { show: false }, axes: [{}, { label: 'USD', size: 60 }], scales: { x: { time: true }, y: { range: [0, top] } } },
      lines as uPlot.AlignedData,
      el,
    );
    return () => plot.destroy();
  }, [data]);
  if (error) return <Status text={error} kind="error" />;
  if (!data) return null;
  const total = data.days.reduce((t, d) => t + Number(d.spent_usd), 0);
  const busiest = data.days.reduce((m, d) => (Number(d.spent_usd) > Number(m.spent_usd) ? d : m), data.days[0]!);
  const capWords = cap === null ? 'no period cap' : `cap ${usd(cap)} a ${data.period}`;
  return (
    <figure class="chart">
      <div
        ref={host}
        role="img"
        aria-label={`USD spent per day over the last ${data.days.length} days: ${usd(String(total))} in all, at most ${usd(busiest.spent_usd)} on ${busiest.date}; ${capWords}.`}
      />
      <figcaption>
        USD spent per day, last {data.days.length} days: <span class="key candidate">spent</span>
        {cap !== null && daily && (
          <>
            , <span class="key cap">daily cap {usd(cap)}</span>
          </>
        )}
        {cap !== null && !daily && (
          <>
            ; the cap is {usd(cap)} a {data.period}
          </>
        )}
        . Total {usd(String(total))}.
      </figcaption>
    </figure>
  );
}
