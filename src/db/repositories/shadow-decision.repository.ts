// Shadow decisions (issue 28): the writes whose shadow policy decided otherwise than the live one.
import type { Db } from '../knex.js';

export interface ShadowDecisionRow {
  id: number;
  agent_id: string;
  operation_id: string;
  operation_type: string;
  asset_symbol: string | null;
  amount_usd_e8: string | null;
  live_allowed: boolean;
  live_code: string | null;
  live_key: string | null;
  shadow_allowed: boolean;
  shadow_code: string | null;
  shadow_key: string | null;
  shadow_message: string | null;
  shadow_policy: Record<string, unknown>;
  created_at: Date;
}

export type NewShadowDecision = Omit<ShadowDecisionRow, 'id' | 'amount_usd_e8'> & { amount_usd_e8: bigint | null };

export async function insertShadowDecision(db: Db, row: NewShadowDecision): Promise<void> {
  await db('shadow_decisions').insert({ ...row, amount_usd_e8: row.amount_usd_e8?.toString() ?? null, shadow_policy: JSON.stringify(row.shadow_policy) });
}

/** Newest first; `before`: the id of the last row of the previous page. */
export async function listShadowDecisions(db: Db, agentId: string, opts: { before?: number; limit: number }): Promise<ShadowDecisionRow[]> {
  const q = db('shadow_decisions').where({ agent_id: agentId });
  if (opts.before !== undefined) q.where('id', '<', opts.before);
  const out = (await q.orderBy('id', 'desc').limit(opts.limit)) as ShadowDecisionRow[];
  return out.map((r) => ({ ...r, id: Number(r.id) }));
}
