// Counting round trips at the pg driver: every statement any pg Client sends while `fn` runs (BEGIN, SAVEPOINT and
// COMMIT included), and the round trips they took: a statement handed to a pipelined client while an earlier one on
// it is still unanswered leaves with it (src/db/knex.ts `batch`), so it joins that round trip. Used by the round-trip
// budgets of reads (test/http) and payments (test/ledger).
import pg from 'pg';

export async function statementsOf<T>(fn: () => Promise<T>): Promise<{ result: T; statements: string[]; roundTrips: string[] }> {
  const statements: string[] = [];
  const trips: string[][] = [];
  /** Per client: its unanswered statements and the round trip they share. */
  const inFlight = new WeakMap<object, { count: number; trip: string[] }>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: { pipeline?: boolean }, ...args: unknown[]) {
    const q = args[0] as string | { text?: string };
    const text = typeof q === 'string' ? q : String(q?.text ?? q);
    statements.push(text);
    let open = inFlight.get(this);
    if (!open || open.count === 0 || !this.pipeline) {
      open = { count: 0, trip: [] };
      trips.push(open.trip);
      inFlight.set(this, open);
    }
    open.trip.push(text);
    open.count += 1;
    const state = open;
    const done = () => {
      state.count -= 1;
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as (...a: unknown[]) => unknown;
      args[last] = (...a: unknown[]) => {
        done();
        return callback(...a);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).then(done, done);
    else done();
    return result;
  };
  try {
    return { result: await fn(), statements, roundTrips: trips.map((t) => t.join(';\n')) };
  } finally {
    proto.query = original;
  }
}
