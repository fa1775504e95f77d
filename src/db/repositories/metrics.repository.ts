// Read-only aggregates behind the Prometheus gauges (src/observability/metrics.ts); read at scrape time.
import { rows, type Db } from '../knex.js';
import { sql } from '../sql.js';

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

/**
 * Live deliveries (waiting or in flight) per endpoint state, with the oldest due one. Two reads, each matching one
 * partial index (`webhook_deliveries_due` for pending and retrying, `webhook_deliveries_leased` for in flight): one
 * `status IN` over the three matches neither, and scanned every delivery (59 ms at 200,000, scripts/bench/metrics.ts).
 */
export async function deliveryQueue(db: Db, now: Date): Promise<DeliveryQueueRow[]> {
  const found = await rows(
    db,
    sql<{ enabled: boolean; status: string; count: string | number; oldest_due: Date | string | null }>`SELECT e.enabled, d.status, count(*) AS count,
        min(d.next_attempt_at) FILTER (WHERE d.next_attempt_at <= ${now}::timestamptz) AS oldest_due
       FROM (SELECT endpoint_id, status, next_attempt_at FROM webhook_deliveries WHERE status IN ('pending', 'retrying')
             UNION ALL
             SELECT endpoint_id, status, NULL FROM webhook_deliveries WHERE status = 'in_flight') d
       JOIN webhook_endpoints e ON e.id = d.endpoint_id
      GROUP BY e.enabled, d.status`,
  );
  return found.map((r) => ({
    endpoint_state: r.enabled ? 'enabled' : 'disabled',
    status: r.status,
    count: Number(r.count),
    oldest_due: r.oldest_due ? new Date(r.oldest_due) : null,
  }));
}
