// Counting round trips at the pg driver: every statement any pg Client sends while `fn` runs (BEGIN, SAVEPOINT and
// COMMIT included). Used by the round-trip budgets of reads (test/http) and payments (test/ledger).
import pg from 'pg';

export async function statementsOf<T>(fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const statements: string[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const q = args[0] as string | { text?: string };
    statements.push(typeof q === 'string' ? q : String(q?.text ?? q));
    return original.apply(this, args);
  };
  try {
    return { result: await fn(), statements };
  } finally {
    proto.query = original;
  }
}
