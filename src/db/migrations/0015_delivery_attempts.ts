// Every webhook delivery attempt keeps its outcome (issue 30 item 1): a row per attempt in
// webhook_delivery_attempts, written by a trigger when a claimed delivery leaves `in_flight`.
//
// Why a trigger: an attempt ends in three statements (delivered attempts recorded in bulk by the next claim,
// a failure recorded under the endpoint's lock, an expired lease reset by the claim); the trigger sees each
// of them as the one transition they share, in_flight -> anything else, so none can forget the history. The
// delivery row itself stays the spec's record: its fields describe the latest attempt, and `attempt` keeps
// counting across manual retries and recoveries (they no longer reset it).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.bigIncrements('id');
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.integer('attempt').notNullable();
    /** When the attempt was claimed (the delivery's last_attempt_at then). */
    t.timestamp('attempted_at', { useTz: true });
    /** When its outcome was recorded (or its lease found expired). */
    t.timestamp('finished_at', { useTz: true }).notNullable();
    /** The delivery's status right after: delivered, retrying or failed. */
    t.text('outcome').notNullable();
    t.integer('http_status');
    t.text('error_class');
    t.integer('latency_ms');
    t.text('response_body');
    /** The worker holding the attempt stopped before recording an outcome (its lease expired). */
    t.boolean('lease_expired').notNullable().defaultTo(false);
    t.index(['delivery_id', 'attempt']);
  });

  await knex.raw(`
    CREATE FUNCTION webhook_delivery_attempt_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      -- The expired-lease reset touches only status, claim and lease: the outcome columns still hold the
      -- attempt before, so that attempt's outcome is not copied as this one's.
      expired boolean := NEW.status = 'retrying' AND OLD.lease_until IS NOT NULL AND OLD.lease_until <= NEW.updated_at
        AND NEW.http_status IS NOT DISTINCT FROM OLD.http_status AND NEW.error_class IS NOT DISTINCT FROM OLD.error_class
        AND NEW.latency_ms IS NOT DISTINCT FROM OLD.latency_ms AND NEW.response_body IS NOT DISTINCT FROM OLD.response_body;
    BEGIN
      INSERT INTO webhook_delivery_attempts (delivery_id, attempt, attempted_at, finished_at, outcome, http_status, error_class, latency_ms, response_body, lease_expired)
      VALUES (NEW.id, NEW.attempt, NEW.last_attempt_at, NEW.updated_at, NEW.status,
              CASE WHEN expired THEN NULL ELSE NEW.http_status END, CASE WHEN expired THEN NULL ELSE NEW.error_class END,
              CASE WHEN expired THEN NULL ELSE NEW.latency_ms END, CASE WHEN expired THEN NULL ELSE NEW.response_body END, expired);
      RETURN NULL;
    END
    $$`);
  await knex.raw(`
    CREATE TRIGGER webhook_delivery_attempt_recorded AFTER UPDATE OF status ON webhook_deliveries
    FOR EACH ROW WHEN (OLD.status = 'in_flight' AND NEW.status <> 'in_flight')
    EXECUTE FUNCTION webhook_delivery_attempt_recorded()`);

  // The deliveries attempted before this migration keep their latest attempt, the only one they still hold.
  await knex.raw(`
    INSERT INTO webhook_delivery_attempts (delivery_id, attempt, attempted_at, finished_at, outcome, http_status, error_class, latency_ms, response_body)
    SELECT id, attempt, last_attempt_at, COALESCE(terminal_at, updated_at), status, http_status, error_class, latency_ms, response_body
    FROM webhook_deliveries WHERE attempt > 0 AND status IN ('retrying', 'delivered', 'failed')`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS webhook_delivery_attempt_recorded ON webhook_deliveries');
  await knex.raw('DROP FUNCTION IF EXISTS webhook_delivery_attempt_recorded()');
  await knex.schema.dropTableIfExists('webhook_delivery_attempts');
}
