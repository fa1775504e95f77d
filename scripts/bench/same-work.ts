// The same-work server of the read benchmark (issue 12): the least a correct server can do for each measured read.
// node:http, one Postgres query for the key check (SHA-256 of the presented key compared in constant time with the
// stored hash, as src/auth/api-key.ts does), one Redis EVALSHA of a GCRA script, one Postgres query for the
// route's data (named prepared statements, as the service uses on its hot reads), JSON out. No framework, no validation, no logging: the floor the real pipeline is compared with.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import pg from 'pg';
import { createClient } from 'redis';
import { EVENT_TYPES, OPERATION_TYPES, SCOPES } from '../../generated/vocabulary.js';
import { constantTimeEqual, sha256Hex } from '../../src/lib/crypto.js';
import { formatAmount, mulDiv } from '../../src/lib/money.js';
import { DEFAULT_RULES, RATE_CLASSES, type RateClass } from '../../src/ratelimit/classes.js';

/** Generic cell rate: one key per agent holding the theoretical arrival time (ms). */
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local allow_at = tat + interval - tolerance
if allow_at > now then return {0, allow_at - now} end
redis.call('SET', KEYS[1], tat + interval, 'PX', tat + interval - now + 1)
return {1, 0}
`;

const KEY_CHECK = `SELECT a.id, a.name, a.owner_id, a.enabled, a.starts_at, a.ends_at, a.api_key_hash, a.created_at, w.id AS wallet_id, w.address, o.deleted_at AS owner_deleted_at,
    (SELECT coalesce(json_agg(r), '[]'::json) FROM rate_limit_overrides r WHERE r.agent_id = a.id) AS rate_overrides
  FROM agents a JOIN wallets w ON w.agent_id = a.id JOIN owners o ON o.id = a.owner_id WHERE a.id = $1`;

interface Agent {
  id: string;
  name: string;
  owner_id: string;
  enabled: boolean;
  starts_at: Date | null;
  ends_at: Date | null;
  created_at: Date;
  wallet_id: string;
  address: string | null;
  rate_overrides: { class: string; limit: number; burst: number; window_seconds: number }[];
}

/** Queries go as named (prepared) statements, as the service's hot reads do (src/db/knex.ts `prepared`). */
interface Db {
  query(text: string, values: unknown[]): Promise<pg.QueryResult>;
}

type Route = (pool: Db, agent: Agent, param: string | undefined) => Promise<unknown>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const page = (items: unknown[]) => ({ ok: true, items, has_more: false, next_cursor: null });

/** One handler per measured path: its one query and the JSON it answers. */
const ROUTES: [RegExp, Route][] = [
  [
    /^\/v1\/agent\/self$/,
    async (_pool, a) => {
      const window = { starts_at: iso(a.starts_at), expires_at: iso(a.ends_at) };
      const rule = (cls: RateClass) => {
        const o = a.rate_overrides.find((r) => r.class === cls);
        return o ? { limit: o.limit, burst: o.burst, windowSeconds: o.window_seconds } : DEFAULT_RULES[cls];
      };
      return {
        ok: true,
        agent: {
          id: a.id,
          name: a.name,
          owner_id: a.owner_id,
          enabled: a.enabled,
          starts_at: window.starts_at,
          ends_at: window.expires_at,
          created_at: iso(a.created_at),
          wallet_address: a.address,
          active_window: window,
        },
        wallet: { id: a.wallet_id, address: a.address },
        auth: { method: 'api_key', scopes: SCOPES, client_id: null },
        permissions: { operation_types: OPERATION_TYPES, webhook_event_types: EVENT_TYPES },
        limits: Object.fromEntries(RATE_CLASSES.map((cls) => [cls, rule(cls)])),
        cannot: [],
        current_usage: {},
      };
    },
  ],
  [
    /^\/v1\/agent\/balances$/,
    async (pool, a) => {
      const { rows } = await pool.query(
        `SELECT s.symbol, s.name, s.category, s.decimals, b.available, b.held, p.usd_e8, d.amount AS deficit FROM assets s
           LEFT JOIN balances b ON b.wallet_id = $1 AND b.asset_symbol = s.symbol LEFT JOIN prices p ON p.asset_symbol = s.symbol
           LEFT JOIN wallet_deficits d ON d.wallet_id = $1 AND d.asset_symbol = s.symbol ORDER BY s.symbol LIMIT 51`,
        [a.wallet_id],
      );
      return page(
        rows.map((r) => {
          const total = formatAmount(BigInt(r.available ?? 0) + BigInt(r.held ?? 0), r.decimals);
          const usd = r.usd_e8 === null ? null : formatAmount(mulDiv(BigInt(r.available ?? 0) + BigInt(r.held ?? 0), BigInt(r.usd_e8), 10n ** BigInt(r.decimals)), 8);
          return {
            asset_symbol: r.symbol,
            asset_display_name: r.name,
            category: r.category,
            amount: total,
            amount_usd: usd,
            available: formatAmount(BigInt(r.available ?? 0), r.decimals),
            held: formatAmount(BigInt(r.held ?? 0), r.decimals),
            total,
            value_usd: usd,
            ...(r.deficit === null ? {} : { deficit: formatAmount(BigInt(r.deficit), r.decimals) }),
          };
        }),
      );
    },
  ],
  [/^\/v1\/agent\/operations$/, async (pool, a) => page((await pool.query('SELECT * FROM operations WHERE agent_id = $1 ORDER BY created_at DESC, id DESC LIMIT 51', [a.id])).rows)],
  [/^\/v1\/agent\/activity$/, async (pool, a) => page((await pool.query('SELECT * FROM activity WHERE agent_id = $1 ORDER BY created_at DESC, id DESC LIMIT 51', [a.id])).rows)],
  [
    /^\/v1\/agent\/webhooks\/([^/]+)\/deliveries$/,
    async (pool, a, id) =>
      page(
        (
          await pool.query(
            `SELECT d.* FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
              WHERE e.id = $1 AND e.agent_id = $2 ORDER BY d.created_at DESC, d.id DESC LIMIT 51`,
            [id, a.id],
          )
        ).rows,
      ),
  ],
];

export interface SameWorkServer {
  server: Server;
  close(): Promise<void>;
}

export async function createSameWorkServer(opts: { databaseUrl: string; redisUrl: string; prefix: string; poolMax: number }): Promise<SameWorkServer> {
  const connections = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolMax });
  const names = new Map<string, string>();
  const pool: Db & { end(): Promise<void> } = {
    query: (text, values) => {
      let name = names.get(text);
      if (!name) names.set(text, (name = `same_work_${names.size}`));
      return connections.query({ name, text, values });
    },
    end: () => connections.end(),
  };
  // No per-command timer: node-redis's default (an AbortSignal.timeout of 5 s per command) fires 5 s after each call
  // and builds a DOMException, which landed in the NEXT figure measured (the app's), ~10 % of its CPU in a profile.
  // Without it this server also does strictly less work per request.
  const redis = createClient({ url: opts.redisUrl, commandOptions: { timeout: 0 } });
  await redis.connect();
  const sha = String(await redis.sendCommand(['SCRIPT', 'LOAD', GCRA]));

  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const route = ROUTES.map(([re, fn]) => [re.exec(path), fn] as const).find(([m]) => m);
    if (!route) return send(res, 404, { ok: false, error: { code: 'not_found' } });
    const agentId = req.headers['x-agent-id'];
    const key = req.headers['x-api-key'];
    if (typeof agentId !== 'string' || typeof key !== 'string') return send(res, 401, { ok: false, error: { code: 'authentication_failed' } });
    const { rows } = await pool.query(KEY_CHECK, [agentId]);
    const row = rows[0];
    const now = new Date();
    if (!row || !constantTimeEqual(sha256Hex(key), row.api_key_hash) || row.owner_deleted_at || !row.enabled || (row.starts_at && now < row.starts_at) || (row.ends_at && now >= row.ends_at)) {
      return send(res, 401, { ok: false, error: { code: 'authentication_failed' } });
    }
    const [allowed] = (await redis.sendCommand(['EVALSHA', sha, '1', `${opts.prefix}{agent:${agentId}}:gcra`, '0', '1000000000'])) as number[];
    if (allowed !== 1) return send(res, 429, { ok: false, error: { code: 'rate_limited' } });
    send(res, 200, await route[1](pool, row as Agent, route[0]![1]));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => send(res, 500, { ok: false, error: { code: 'internal_error', message: String(err) } }));
  });
  server.keepAliveTimeout = 5_000;
  return {
    server,
    async close() {
      await redis.quit();
      await pool.end();
    },
  };
}
