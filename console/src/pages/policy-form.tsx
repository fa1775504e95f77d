// The policy as a form (issue 27): operation types as choices, caps with their units, allow-lists as editable lists,
// a plain-language summary, and each problem the service finds shown at its field. The JSON stays beside it.
import { useState } from 'preact/hooks';
import { OPERATION_TYPES } from '../../../generated/vocabulary.js';
import type { Schemas } from '../api.js';
import { amount } from '../format.js';

export type Policy = Schemas['PolicyDocument'];
type Key = string;

/** The caps: key, label, unit, and whether the value is a whole number (else a USD decimal string). */
const CAPS: [Key, string, string, boolean][] = [
  ['per_tx_usd', 'Per operation', 'USD', false],
  ['per_period_usd', 'Per period', 'USD', false],
  ['lifetime_usd', 'In total (lifetime)', 'USD', false],
  ['max_txs_per_period', 'Operations per period', 'operations', true],
  ['max_swaps_per_period', 'Conversions per period', 'conversions', true],
  ['tx_cooldown_blocks', 'Cooldown between operations', 'blocks (2 s each)', true],
  ['max_slippage_bps', 'Maximum slippage', 'basis points (100 = 1 %)', true],
  ['max_ltv_bps', 'Maximum loan-to-value', 'basis points', true],
];
const APPROVALS: [Key, string, string, boolean][] = [
  ['approval_threshold_usd', 'Ask me above', 'USD', false],
  ['approval_ttl_seconds', 'Approval requests expire after', 'seconds', true],
];
const LISTS: [Key, string, [string, string][], string][] = [
  ['allowed_assets', 'Assets', [['all', 'Any asset']], 'Asset symbol'],
  [
    'allowed_recipients',
    'Recipients',
    [
      ['approved', 'Approved payees only'],
      ['all', 'Anyone'],
    ],
    'Recipient address or id',
  ],
  ['allowed_protocols', 'Protocols', [['all', 'Any protocol']], 'Protocol id'],
];

const words = (t: string) => t.replace(/[._]/g, ' ');
/** The service's problems name their key first ("per_tx_usd must be …", "operation_types: unknown value …"). */
export const problemsOf = (problems: string[], key: Key) => problems.filter((p) => p.startsWith(`${key} `) || p.startsWith(`${key}:`));
const KEYS = ['operation_types', 'period', 'fail_on_zero_price', 'approve_new_payees', ...CAPS.map((c) => c[0]), ...APPROVALS.map((c) => c[0]), ...LISTS.map((l) => l[0])];
/** Problems no field shows (an unknown key, a policy that is not an object). */
export const generalProblems = (problems: string[]) => problems.filter((p) => !KEYS.some((k) => problemsOf([p], k).length > 0));

function Problems({ id, list }: { id: string; list: string[] }) {
  if (list.length === 0) return null;
  return (
    <ul id={id} class="problems">
      {list.map((p) => (
        <li>{p}</li>
      ))}
    </ul>
  );
}

function Cap({ policy, problems, k, label, unit, whole, onChange }: { policy: Policy; problems: string[]; k: Key; label: string; unit: string; whole: boolean; onChange: (p: Policy) => void }) {
  const mine = problemsOf(problems, k);
  const v = policy[k];
  return (
    <div class="field cap">
      <label for={`cap-${k}`}>
        {label} <span class="unit">({unit})</span>
      </label>
      <input
        id={`cap-${k}`}
        inputMode={whole ? 'numeric' : 'decimal'}
        value={v === undefined || v === null ? '' : String(v)}
        placeholder="no limit"
        aria-invalid={mine.length > 0}
        aria-describedby={mine.length ? `cap-${k}-problems` : undefined}
        onInput={(e) => {
          const text = (e.target as HTMLInputElement).value.trim();
          const next = { ...policy };
          if (text === '') delete next[k];
          else next[k] = whole && /^\d+$/.test(text) ? Number(text) : text;
          onChange(next);
        }}
      />
      <Problems id={`cap-${k}-problems`} list={mine} />
    </div>
  );
}

function AllowList({
  policy,
  problems,
  k,
  legend,
  modes,
  itemLabel,
  onChange,
}: {
  policy: Policy;
  problems: string[];
  k: Key;
  legend: string;
  modes: [string, string][];
  itemLabel: string;
  onChange: (p: Policy) => void;
}) {
  const v = policy[k];
  const listed = Array.isArray(v) ? (v as string[]) : null;
  // Absent: "all", or for recipients "approved payees only".
  const mode = listed ? 'listed' : v === 'all' ? 'all' : modes[0]![0];
  const [item, setItem] = useState('');
  const mine = problemsOf(problems, k);
  const set = (value: unknown) => {
    const next = { ...policy };
    if (value === undefined) delete next[k];
    else next[k] = value;
    onChange(next);
  };
  return (
    <fieldset class="allow" aria-describedby={mine.length ? `list-${k}-problems` : undefined}>
      <legend>{legend}</legend>
      {[...modes, ['listed', 'Only these'] as [string, string]].map(([m, text]) => (
        <label class="choice">
          <input
            type="radio"
            name={`mode-${k}`}
            checked={mode === m}
            onChange={() => set(m === 'listed' ? (listed ?? []) : m === 'approved' || (m === 'all' && modes[0]![0] === 'all') ? undefined : m)}
          />{' '}
          {text}
        </label>
      ))}
      {listed && (
        <>
          <ul class="items" aria-label={`${legend} allowed`}>
            {listed.map((x, i) => (
              <li>
                <code>{x}</code>{' '}
                <button type="button" class="link" aria-label={`Remove ${x}`} onClick={() => set(listed.filter((_, j) => j !== i))}>
                  Remove
                </button>
              </li>
            ))}
            {listed.length === 0 && <li class="empty">None yet: nothing is allowed.</li>}
          </ul>
          <div class="row">
            <label class="sr-only" for={`add-${k}`}>
              {itemLabel}
            </label>
            <input id={`add-${k}`} value={item} placeholder={itemLabel} onInput={(e) => setItem((e.target as HTMLInputElement).value)} />
            <button
              type="button"
              onClick={() => {
                if (item.trim()) set([...listed, item.trim()]);
                setItem('');
              }}
            >
              Add to {legend.toLowerCase()}
            </button>
          </div>
        </>
      )}
      <Problems id={`list-${k}-problems`} list={mine} />
    </fieldset>
  );
}

/** What the agent can do, in sentences. */
export function summarize(p: Policy): string[] {
  const out: string[] = [];
  const types = p.operation_types;
  if (types === 'all') out.push('It may start any kind of operation, including kinds added later.');
  else if (Array.isArray(types) && types.length) out.push(`It may: ${types.map((t) => words(String(t))).join(', ')}.`);
  else out.push('It may not start any operation yet: choose its operation types.');
  const usdOf = (k: string) => (typeof p[k] === 'string' ? `$${amount(p[k] as string)}` : null);
  const period = typeof p.period === 'string' ? p.period : 'day';
  const caps = [
    usdOf('per_tx_usd') && `${usdOf('per_tx_usd')} per operation`,
    usdOf('per_period_usd') && `${usdOf('per_period_usd')} a ${period}`,
    usdOf('lifetime_usd') && `${usdOf('lifetime_usd')} in total`,
  ].filter(Boolean);
  out.push(caps.length ? `It may spend at most ${caps.join(', ')}.` : 'Its spending has no USD cap.');
  if (typeof p.max_txs_per_period === 'number') out.push(`At most ${p.max_txs_per_period} operations a ${period}.`);
  if (typeof p.max_swaps_per_period === 'number') out.push(`At most ${p.max_swaps_per_period} conversions a ${period}.`);
  if (typeof p.tx_cooldown_blocks === 'number' && p.tx_cooldown_blocks > 0) out.push(`It waits ${p.tx_cooldown_blocks} blocks (about ${p.tx_cooldown_blocks * 2} s) between operations.`);
  const recipients = p.allowed_recipients;
  out.push(recipients === 'all' ? 'It may pay anyone.' : Array.isArray(recipients) ? `It may pay only: ${recipients.join(', ') || 'no one'}.` : 'It may pay only payees you approved.');
  const assets = p.allowed_assets;
  if (Array.isArray(assets)) out.push(`It may use only ${assets.join(', ') || 'no asset'}.`);
  if (usdOf('approval_threshold_usd')) out.push(`Operations above ${usdOf('approval_threshold_usd')} wait for your approval.`);
  if (p.approve_new_payees === true) out.push('A payment to a new payee waits for your approval.');
  if (p.fail_on_zero_price === true) out.push('An operation in an asset without a price is refused.');
  return out;
}

export function PolicyForm({ policy, problems, onChange }: { policy: Policy; problems: string[]; onChange: (p: Policy) => void }) {
  const types = policy.operation_types;
  const chosen = Array.isArray(types) ? (types as string[]) : [];
  const typeProblems = problemsOf(problems, 'operation_types');
  const flag = (k: Key, text: string) => (
    <label class="choice">
      <input type="checkbox" checked={policy[k] === true} onChange={(e) => onChange({ ...policy, [k]: (e.target as HTMLInputElement).checked })} /> {text}
    </label>
  );
  return (
    <div class="policy-form">
      <section aria-labelledby="policy-summary-h" class="summary">
        <h3 id="policy-summary-h">What this agent can do</h3>
        <ul>
          {summarize(policy).map((s) => (
            <li>{s}</li>
          ))}
        </ul>
      </section>
      <fieldset class="types" aria-describedby={typeProblems.length ? 'types-problems' : undefined}>
        <legend>Operation types</legend>
        <label class="choice all">
          <input type="checkbox" checked={types === 'all'} onChange={(e) => onChange({ ...policy, operation_types: (e.target as HTMLInputElement).checked ? 'all' : [] })} /> All, including kinds added
          later
        </label>
        <div class="grid">
          {OPERATION_TYPES.map((t) => (
            <label class="choice">
              <input
                type="checkbox"
                disabled={types === 'all'}
                checked={types === 'all' || chosen.includes(t)}
                onChange={(e) => onChange({ ...policy, operation_types: (e.target as HTMLInputElement).checked ? [...chosen, t] : chosen.filter((x) => x !== t) })}
              />{' '}
              {words(t)}
            </label>
          ))}
        </div>
        <Problems id="types-problems" list={typeProblems} />
      </fieldset>
      <fieldset class="caps">
        <legend>Caps</legend>
        <div class="field cap">
          <label for="cap-period">Period</label>
          <select id="cap-period" value={typeof policy.period === 'string' ? policy.period : 'day'} onChange={(e) => onChange({ ...policy, period: (e.target as HTMLSelectElement).value })}>
            <option value="day">day</option>
            <option value="week">week</option>
            <option value="month">month</option>
          </select>
          <Problems id="cap-period-problems" list={problemsOf(problems, 'period')} />
        </div>
        {CAPS.map(([k, label, unit, whole]) => (
          <Cap policy={policy} problems={problems} k={k} label={label} unit={unit} whole={whole} onChange={onChange} />
        ))}
        {flag('fail_on_zero_price', 'Refuse operations in an asset without a price')}
      </fieldset>
      <fieldset class="caps">
        <legend>Approvals</legend>
        {APPROVALS.map(([k, label, unit, whole]) => (
          <Cap policy={policy} problems={problems} k={k} label={label} unit={unit} whole={whole} onChange={onChange} />
        ))}
        {flag('approve_new_payees', 'Ask me before paying a new payee')}
      </fieldset>
      {LISTS.map(([k, legend, modes, itemLabel]) => (
        <AllowList policy={policy} problems={problems} k={k} legend={legend} modes={modes} itemLabel={itemLabel} onChange={onChange} />
      ))}
    </div>
  );
}
