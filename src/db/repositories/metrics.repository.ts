// Read-only aggregates behind the Prometheus gauges (src/observability/metrics.ts); read at scrape time.
import type { Db } from '../knex.js';

/** Seconds since the oldest operation became due for settlement and is still unsettled (0 when none); uses `operations_due`. */
export async function settlementLagSeconds(db: Db, now: Date): Promise<number> {
  const row = await db('operations').whereIn('status', ['accepted', 'submitted']).where('settle_after', '<=', now).min<{ oldest: Date | string | null }>('settle_after as oldest').first();
  return row?.oldest ? Math.max(0, (now.getTime() - new Date(row.oldest).getTime()) / 1000) : 0;
}

export interface DeliveryQueueRow {
  endpoint_state: 'enabled' | 'disabled';
  status: string;
  count: number;
  /** Oldest next_attempt_at that is already due (pending or retrying), else null. */
  oldest_due: Date | null;
}

/** Live deliveries (waiting or in flight) per endpoint state, with the oldest due one; the partial indexes keep this to live rows. */
export async function deliveryQueue(db: Db, now: Date): Promise<DeliveryQueueRow[]> {
  const rows = await db('webhook_deliveries as d')
    .join('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .whereIn('d.status', ['pending', 'retrying', 'in_flight'])
    .groupBy('e.enabled', 'd.status')
    .select('e.enabled', 'd.status')
    .count<{ enabled: boolean; status: string; count: string | number; oldest_due: Date | string | null }[]>('* as count')
    .select(db.raw("min(d.next_attempt_at) FILTER (WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ?) AS oldest_due", [now]));
  return rows.map((r) => ({
    endpoint_state: r.enabled ? 'enabled' : 'disabled',
    status: r.status,
    count: Number(r.count),
    oldest_due: r.oldest_due ? new Date(r.oldest_due) : null,
  }));
}
