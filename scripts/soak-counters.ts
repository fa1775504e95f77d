// The soak's counter check (issue 30 item 6): the sum over every process of the increase of
// agentapi_operations_total{type,status} equals, per type and terminal status, the rows the operations table gained.
// A module of scripts/soak.ts, not an entry point; test/observability/counters-sum.test.ts runs it on two apps.
//
// The comparable definition. An operation enters exactly one terminal status (executed, execution_failed,
// policy_rejected, cancelled), once, through a guarded insert or transition, and never leaves it; so between two
// snapshots the rows in (type, terminal status) grow by exactly the entries counted into that series by the processes
// that wrote them. Non-terminal statuses are not compared: a row re-enters `accepted` when the chain is unavailable and
// `submitted` at each receipt recheck, so their counters count entries, not rows. The equality needs, at both snapshots:
// no write in flight (every process idle, no operation due for settlement: live operations are waited out, so nothing
// commits between the table read and the scrapes), every writer scraped, and no process restarted in between (a
// restarted counter starts again from 0 and a SIGKILLed one takes its unscraped increments with it, by Prometheus'
// design). The soak therefore checks it over a window of its own after the faults, not across its SIGKILLs.
import type { Knex } from 'knex';

/** Counts keyed `${type} ${status}`. */
export type Tally = Map<string, number>;

export const TERMINAL_STATUSES = ['executed', 'execution_failed', 'policy_rejected', 'cancelled'] as const;

export interface ProcessSnapshot {
  /** process_start_time_seconds: a different value at the end means the process restarted in between. */
  startedAt: number | null;
  operations: Tally;
}

/** Reads agentapi_operations_total and process_start_time_seconds from a scrape's text exposition format. */
export function parseScrape(exposition: string): ProcessSnapshot {
  const operations: Tally = new Map();
  let startedAt: number | null = null;
  for (const line of exposition.split('\n')) {
    const m = /^(agentapi_operations_total|process_start_time_seconds)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    if (m[1] === 'process_start_time_seconds') {
      startedAt = Number(m[3]);
      continue;
    }
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((p) => [p[1]!, p[2]!]));
    operations.set(`${labels.type} ${labels.status}`, Number(m[3]));
  }
  return { startedAt, operations };
}

/** GET <url> (a process's /metrics), parsed; throws when it does not answer 200. */
export async function scrapeProcess(url: string): Promise<ProcessSnapshot> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return parseScrape(await res.text());
}

/** The operations table by type and status (the soak's and the test's check connection; run it only at a snapshot). */
export async function countOperationRows(db: Knex): Promise<Tally> {
  const rows = (await db('operations').select('type', 'status').count({ n: '*' }).groupBy('type', 'status')) as Array<{ type: string; status: string; n: string | number }>;
  return new Map(rows.map((r) => [`${r.type} ${r.status}`, Number(r.n)]));
}

export interface CounterComparison {
  ok: boolean;
  /** One entry per (type, terminal status) that changed in either source. */
  rows: Array<{ key: string; counted: number; table: number }>;
  problems: string[];
  detail: string;
}

/** Compares the summed counter increases of every process with the table's growth, per (type, terminal status). */
export function compareOperationCounters(input: { before: ProcessSnapshot[]; after: ProcessSnapshot[]; tableBefore: Tally; tableAfter: Tally }): CounterComparison {
  const problems: string[] = [];
  if (input.before.length !== input.after.length) problems.push(`${input.before.length} processes scraped at the start, ${input.after.length} at the end`);
  const counted: Tally = new Map();
  input.after.forEach((end, i) => {
    const start = input.before[i];
    if (!start) return;
    if (start.startedAt !== end.startedAt) problems.push(`process ${i + 1} restarted between the scrapes`);
    for (const [key, value] of end.operations) counted.set(key, (counted.get(key) ?? 0) + value - (start.operations.get(key) ?? 0));
  });
  const terminal = (key: string) => (TERMINAL_STATUSES as readonly string[]).includes(key.split(' ')[1]!);
  const keys = [...new Set([...counted.keys(), ...input.tableAfter.keys(), ...input.tableBefore.keys()])].filter(terminal).sort();
  const rows = keys
    .map((key) => ({ key, counted: counted.get(key) ?? 0, table: (input.tableAfter.get(key) ?? 0) - (input.tableBefore.get(key) ?? 0) }))
    .filter((r) => r.counted !== 0 || r.table !== 0);
  const differ = rows.filter((r) => r.counted !== r.table);
  if (differ.length > 0) problems.push(`${differ.length} series differ`);
  if (rows.length === 0) problems.push('no operation reached a terminal status in the window');
  const detail = `${input.after.length} processes; ${rows.map((r) => `${r.key.replace(' ', '/')} counted ${r.counted} table ${r.table}${r.counted === r.table ? '' : ' (DIFFERS)'}`).join(', ')}${problems.length ? `; ${problems.join('; ')}` : ''}`;
  return { ok: problems.length === 0, rows, problems, detail };
}
