// The one idiom for hand-written SQL: a `sql` tagged template that yields pg's `{ text, values, name? }`. Values are
// always bound parameters ($1, $2, ...), never spliced into the text; run with `rows`, `batch` or `commitWith` (knex.ts).
import { createHash } from 'node:crypto';

/** A statement: text with `$n` parameters, its values, and a name when it runs as a prepared (named) statement. `R` is its row. */
export interface Sql<R = Record<string, unknown>> {
  readonly text: string;
  readonly values: readonly unknown[];
  readonly name?: string;
  /** The row type, for the compiler only (never set). */
  readonly row?: R;
}

/** A piece of SQL: a `sql` fragment placed inside another keeps its own values (renumbered). */
class Fragment<R> implements Sql<R> {
  constructor(
    readonly text: string,
    readonly values: readonly unknown[],
  ) {}
}

/**
 * `sql\`SELECT ... WHERE id = ${id}\``: every `${}` becomes the next `$n` parameter, except a nested `sql` fragment,
 * whose text is placed as is (its parameters renumbered). There is no way to place a value in the text.
 */
export function sql<R = Record<string, unknown>>(strings: TemplateStringsArray, ...values: unknown[]): Sql<R> {
  let text = strings[0]!;
  const out: unknown[] = [];
  values.forEach((value, i) => {
    if (value instanceof Fragment) {
      text += value.text.replace(/\$(\d+)/g, (_, n: string) => `$${out.length + Number(n)}`);
      out.push(...value.values);
    } else {
      out.push(value);
      text += `$${out.length}`;
    }
    text += strings[i + 1]!;
  });
  return new Fragment<R>(text, out);
}

/**
 * The statement as a named (server-side prepared) statement: Postgres parses and plans it once per connection, and
 * each later run only binds and executes. Without `name`, one is derived from the text, so two shapes of a builder
 * query (a filter present or not) are two statements. Only for statements whose text takes a bounded number of shapes.
 */
export function prepared<R>(statement: Sql<R>, name?: string): Sql<R> {
  return { text: statement.text, values: statement.values, name: name ?? `p_${createHash('sha256').update(statement.text).digest('base64url').slice(0, 22)}` };
}

/** A compiled knex query (`builder.toSQL().toNative()`) as a statement. */
export function fromNative<R>(native: { sql: string; bindings: readonly unknown[] }): Sql<R> {
  return new Fragment<R>(native.sql, native.bindings);
}

/** A quoted identifier (a table or channel name fixed by the code), placed in the text as a fragment without values. */
export function identifier(name: string): Sql<never> {
  return new Fragment<never>(`"${name.replace(/"/g, '""')}"`, []);
}

/** Fragments (or values, each a parameter) joined by `, `, as one fragment: a column list, a VALUES row. */
export function list(items: readonly unknown[]): Sql<never> {
  const strings = ['', ...items.slice(1).map(() => ', '), ''];
  return sql<never>(Object.assign(strings, { raw: strings }) as TemplateStringsArray, ...items);
}
