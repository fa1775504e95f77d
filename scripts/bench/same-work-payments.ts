// The same-work payment server (issue 25, item 8): the least a correct server can do for POST /v1/agent/payments to an
// address. node:http and pg only (no framework, no validation library, no logging), and the same round trips a payment
// needs: the key check (plus the Redis rate-limit script), BEGIN, the Idempotency-Key claim, the payees + price + policy
// lock + usage sums (three statements pipelined in one round trip), the hold + operation row (one statement), and the
// sealed answer stored with the COMMIT (pipelined). Named statements throughout, the pool in pg's pipeline mode.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import pg from 'pg';
import { createClient } from 'redis';
import { canonicalJson, constantTimeEqual, createSealer, sha256Hex } from '../../src/lib/crypto.js';
import { formatAmount, mulDiv, parseAmount } from '../../src/lib/money.js';

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

const KEY_CHECK = `SELECT a.id, a.enabled, a.starts_at, a.ends_at, a.api_key_hash, w.id AS wallet_id, o.deleted_at AS owner_deleted_at
  FROM agents a JOIN wallets w ON w.agent_id = a.id JOIN owners o ON o.id = a.owner_id WHERE a.id = $1`;

const CLAIM = `WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked),
  claimed AS (
    INSERT INTO idempotency_keys (agent_id, key, fingerprint, operation_id, status_code, sealed_response, response_body, response_headers, created_at, expires_at)
    SELECT $2, $3, $4, $5, 0, NULL, NULL, '{}'::jsonb, $6, $7 FROM lock WHERE lock.locked
    ON CONFLICT (agent_id, key) DO UPDATE
      SET fingerprint = EXCLUDED.fingerprint, operation_id = EXCLUDED.operation_id, status_code = 0, sealed_response = NULL, response_body = NULL,
          response_headers = '{}'::jsonb, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
      WHERE idempotency_keys.expires_at <= EXCLUDED.created_at
    RETURNING 1)
  SELECT (SELECT locked FROM lock) AS locked, EXISTS (SELECT 1 FROM claimed) AS claimed`;

const PAYEES_AND_PRICE = `SELECT
    (SELECT coalesce(json_agg(json_build_object('id', r.id, 'name', r.name) ORDER BY r.created_at), '[]'::json)
       FROM recipients r WHERE r.agent_id = $1::uuid AND lower(r.address) = lower($2::text)) AS recipients,
    (SELECT coalesce(json_agg(json_build_object('id', d.id, 'label', d.label) ORDER BY d.created_at), '[]'::json)
       FROM trusted_destinations d WHERE d.agent_id = $1::uuid AND d.status = 'confirmed' AND lower(d.address) = lower($2::text)) AS destinations,
    s.decimals, p.usd_e8
  FROM assets s LEFT JOIN prices p ON p.asset_symbol = s.symbol WHERE s.symbol = $3::text`;

const LOCK = `SELECT policy FROM agent_policies WHERE agent_id = $1::uuid FOR UPDATE`;

const COUNTED = `counts_toward_limits AND status IN ('accepted', 'submitted', 'executed')`;
const USAGE = `SELECT (SELECT coalesce(sum(amount_usd_e8), 0)::text || ':' || count(*) FROM operations o
    WHERE o.agent_id = p.agent_id AND ${COUNTED} AND o.created_at >= $2::timestamptz) AS period
  FROM agent_policies p WHERE p.agent_id = $1::uuid`;

const ACCEPT = `WITH reserved AS (
    UPDATE balances SET available = available - $1::numeric, held = held + $1::numeric, updated_at = $2
    WHERE wallet_id = $3 AND asset_symbol = $4 AND available >= $1::numeric RETURNING wallet_id
  ), hold AS (
    INSERT INTO holds (id, operation_id, wallet_id, asset_symbol, amount, status, created_at)
    SELECT $5::uuid, $6::uuid, wallet_id, $4, $1::numeric, 'held', $2 FROM reserved
  ), journal AS (
    INSERT INTO journal_entries (journal_id, operation_id, account, wallet_id, asset_symbol, amount, entry_type, created_at)
    SELECT $7::uuid, $6::uuid, leg.account, reserved.wallet_id, $4, leg.amount, 'hold', $2
    FROM reserved CROSS JOIN (VALUES (1, $8, -$1::numeric), (2, $9, $1::numeric)) AS leg(n, account, amount) ORDER BY leg.n
  ), op AS (
    INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8, fee_usd_e8,
      counts_toward_limits, human_message, idempotency_key_hash, to_address, tx_hash, details, settle_after, created_at, updated_at)
    VALUES ($6, $10, $3, 'payment', 'accepted', 'payment', $6, $4, $1, $11, 0, true, $12, $13, $14, NULL, $15, $2, $2, $2) RETURNING *
  )
  SELECT op.*, (SELECT count(*)::int FROM reserved) AS hold_placed FROM op`;

const STORE = `UPDATE idempotency_keys SET status_code = $1, sealed_response = $2, response_headers = '{}'::jsonb WHERE agent_id = $3 AND key = $4`;

const q = (name: string, text: string, values: unknown[]) => ({ name, text, values });

export interface SameWorkPaymentServer {
  server: Server;
  close(): Promise<void>;
}

export async function createSameWorkPaymentServer(opts: { databaseUrl: string; redisUrl: string; prefix: string; poolMax: number; masterKey: string }): Promise<SameWorkPaymentServer> {
  const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolMax, pipeline: true } as pg.PoolConfig);
  const redis = createClient({ url: opts.redisUrl, commandOptions: { timeout: 0 } });
  await redis.connect();
  const sha = String(await redis.sendCommand(['SCRIPT', 'LOAD', GCRA]));
  const sealer = createSealer(opts.masterKey);

  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const readBody = (req: IncomingMessage) =>
    new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST' || req.url !== '/v1/agent/payments') return send(res, 404, { ok: false, error: { code: 'not_found' } });
    const agentId = req.headers['x-agent-id'];
    const apiKey = req.headers['x-api-key'];
    const key = req.headers['idempotency-key'];
    if (typeof agentId !== 'string' || typeof apiKey !== 'string' || typeof key !== 'string') return send(res, 401, { ok: false, error: { code: 'authentication_failed' } });
    const text = await readBody(req);
    const body = JSON.parse(text) as { to: string; asset: string; amount: string };
    const { rows: agents } = await pool.query(q('sw_key_check', KEY_CHECK, [agentId]));
    const agent = agents[0];
    const now = new Date();
    if (
      !agent ||
      !constantTimeEqual(sha256Hex(apiKey), agent.api_key_hash) ||
      agent.owner_deleted_at ||
      !agent.enabled ||
      (agent.starts_at && now < agent.starts_at) ||
      (agent.ends_at && now >= agent.ends_at)
    ) {
      return send(res, 401, { ok: false, error: { code: 'authentication_failed' } });
    }
    const [allowed] = (await redis.sendCommand(['EVALSHA', sha, '1', `${opts.prefix}{agent:${agentId}}:gcra`, '0', '1000000000'])) as number[];
    if (allowed !== 1) return send(res, 429, { ok: false, error: { code: 'rate_limited' } });

    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const operationId = randomUUID();
      const fingerprint = sha256Hex(canonicalJson({ method: 'POST', path: '/v1/agent/payments', body }));
      const { rows: claim } = await client.query(q('sw_claim', CLAIM, [`${agentId}:${key}`, agentId, key, fingerprint, operationId, now, new Date(now.getTime() + 86_400_000)]));
      if (!claim[0].locked || !claim[0].claimed) {
        await client.query('ROLLBACK');
        return send(res, 409, { ok: false, error: { code: 'idempotency_request_in_progress' } });
      }
      const dayStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
      const [payees, locked, usage] = await Promise.all([
        client.query(q('sw_payees_and_price', PAYEES_AND_PRICE, [agentId, body.to, body.asset])),
        client.query(q('sw_lock', LOCK, [agentId])),
        client.query(q('sw_usage', USAGE, [agentId, dayStart])),
      ]);
      const asset = payees.rows[0];
      const amount = parseAmount(body.amount, asset.decimals);
      const usdE8 = mulDiv(amount, BigInt(asset.usd_e8), 10n ** BigInt(asset.decimals));
      const policy = locked.rows[0]?.policy as { per_tx_usd?: string; per_period_usd?: string; max_txs_per_period?: number } | undefined;
      const [usedUsd, usedCount] = String(usage.rows[0]?.period ?? '0:0').split(':');
      const cap = (v: string | undefined) => (v === undefined ? null : parseAmount(v, 8));
      const perTx = cap(policy?.per_tx_usd);
      const perPeriod = cap(policy?.per_period_usd);
      if (
        !policy ||
        (perTx !== null && usdE8 > perTx) ||
        (perPeriod !== null && BigInt(usedUsd!) + usdE8 > perPeriod) ||
        (policy.max_txs_per_period !== undefined && Number(usedCount) + 1 > policy.max_txs_per_period)
      ) {
        await client.query('ROLLBACK');
        return send(res, 403, { ok: false, error: { code: 'limit_exceeded' } });
      }
      const walletId = agent.wallet_id as string;
      const message = `Paying ${formatAmount(amount, asset.decimals)} ${body.asset} to ${body.to.slice(0, 6)}…${body.to.slice(-4)}`;
      const details = { route: 'address', recipient_id: null, trusted_destination_id: null, recurring_payment_id: null, note: null };
      const { rows: accepted } = await client.query(
        q('sw_accept', ACCEPT, [
          amount.toString(),
          now,
          walletId,
          body.asset,
          randomUUID(),
          operationId,
          randomUUID(),
          `available:${walletId}`,
          `held:${walletId}`,
          agentId,
          usdE8.toString(),
          message,
          sha256Hex(key),
          body.to,
          JSON.stringify(details),
        ]),
      );
      const op = accepted[0];
      if (op.hold_placed !== 1) {
        await client.query('ROLLBACK');
        return send(res, 422, { ok: false, error: { code: 'insufficient_funds' } });
      }
      const answer = {
        ok: true,
        operation: {
          id: op.id,
          type: op.type,
          status: op.status,
          asset: op.asset_symbol,
          amount: formatAmount(BigInt(op.amount), asset.decimals),
          amount_usd: formatAmount(BigInt(op.amount_usd_e8), 8),
          to: op.to_address,
          human_message: op.human_message,
          details: op.details,
          created_at: op.created_at.toISOString(),
          updated_at: op.updated_at.toISOString(),
        },
      };
      const json = JSON.stringify(answer);
      await Promise.all([client.query(q('sw_store', STORE, [200, sealer.seal(json), agentId, key])), client.query('COMMIT')]);
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
      res.end(json);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
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
