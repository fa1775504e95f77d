// Webhook endpoints: rows, per-agent cap lock, failure counters and the disable/enable transitions.
import type { Db } from '../knex.js';

export interface WebhookEndpointRow {
  id: string;
  agent_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  enabled: boolean;
  disabled_reason: string | null;
  disabled_at: Date | null;
  consecutive_failures: number;
  failing_since: Date | null;
  last_delivered_at: Date | null;
  last_failure_at: Date | null;
  sealed_secret: string;
  sealed_previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type EndpointPatch = Partial<
  Pick<
    WebhookEndpointRow,
    | 'url'
    | 'description'
    | 'event_types'
    | 'enabled'
    | 'disabled_reason'
    | 'disabled_at'
    | 'consecutive_failures'
    | 'failing_since'
    | 'sealed_secret'
    | 'sealed_previous_secret'
    | 'previous_secret_expires_at'
  >
> & { updated_at: Date };

/** Serialises endpoint creation per agent so the 10-endpoint cap holds under concurrency. */
export async function lockAgentRow(db: Db, agentId: string): Promise<boolean> {
  const row = await db('agents').where({ id: agentId }).forUpdate().first('id');
  return row !== undefined;
}

export async function countEndpoints(db: Db, agentId: string): Promise<number> {
  const row = await db('webhook_endpoints').where({ agent_id: agentId }).count<{ n: number }[]>({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

export async function insertEndpoint(db: Db, row: WebhookEndpointRow): Promise<WebhookEndpointRow> {
  const [inserted] = await db('webhook_endpoints').insert(row).returning('*');
  return inserted as WebhookEndpointRow;
}

export async function findEndpoint(db: Db, agentId: string, id: string, options: { forUpdate?: boolean } = {}): Promise<WebhookEndpointRow | undefined> {
  const query = db('webhook_endpoints').where({ id, agent_id: agentId });
  if (options.forUpdate) query.forUpdate();
  return query.first();
}

export async function findEndpointById(db: Db, id: string, options: { forUpdate?: boolean } = {}): Promise<WebhookEndpointRow | undefined> {
  const query = db('webhook_endpoints').where({ id });
  if (options.forUpdate) query.forUpdate();
  return query.first();
}

/** Newest first; `after` is the last row of the previous page (exclusive keyset). */
export async function listEndpoints(db: Db, agentId: string, options: { after?: { created_at: Date; id: string }; limit: number }): Promise<WebhookEndpointRow[]> {
  const query = db('webhook_endpoints').where({ agent_id: agentId });
  if (options.after) {
    const { created_at, id } = options.after;
    query.andWhere((q) => q.where('created_at', '<', created_at).orWhere((q2) => q2.where('created_at', '=', created_at).andWhere('id', '<', id)));
  }
  return query
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(options.limit);
}

export async function updateEndpoint(db: Db, id: string, patch: EndpointPatch): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db('webhook_endpoints').where({ id }).update(patch).returning('*');
  return row as WebhookEndpointRow | undefined;
}

export async function deleteEndpoint(db: Db, agentId: string, id: string): Promise<number> {
  return db('webhook_endpoints').where({ id, agent_id: agentId }).delete();
}

/** Clears the failure state; skips the write (and its row lock) when only a sub-second last_delivered_at would change. */
export async function recordEndpointSuccess(db: Db, id: string, at: Date): Promise<void> {
  await db('webhook_endpoints')
    .where({ id })
    .andWhere((q) =>
      q
        .where('consecutive_failures', '<>', 0)
        .orWhereNotNull('failing_since')
        .orWhereNull('last_delivered_at')
        .orWhere('last_delivered_at', '<', new Date(at.getTime() - 1000)),
    )
    .update({ consecutive_failures: 0, failing_since: null, last_delivered_at: at, updated_at: at });
}

export async function recordEndpointFailure(db: Db, id: string, at: Date): Promise<void> {
  await db('webhook_endpoints')
    .where({ id })
    .update({
      consecutive_failures: db.raw('consecutive_failures + 1'),
      failing_since: db.raw('COALESCE(failing_since, ?)', [at]),
      last_failure_at: at,
      updated_at: at,
    });
}

/** Guarded transition enabled -> disabled(sustained_failures); false when it was already disabled. */
export async function disableEndpointForFailures(db: Db, id: string, at: Date): Promise<boolean> {
  const count = await db('webhook_endpoints').where({ id, enabled: true }).update({ enabled: false, disabled_reason: 'sustained_failures', disabled_at: at, updated_at: at });
  return count === 1;
}

/** The owner's re-enable: clears the failure state. */
export async function enableEndpointByOwner(db: Db, id: string, at: Date): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db('webhook_endpoints')
    .where({ id })
    .update({ enabled: true, disabled_reason: null, disabled_at: null, consecutive_failures: 0, failing_since: null, updated_at: at })
    .returning('*');
  return row as WebhookEndpointRow | undefined;
}
