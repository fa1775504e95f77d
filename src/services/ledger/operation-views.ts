// Operations as the document shows them: one operation, a page of them, and the answer of an accepted write.
import type { OnchainView } from '../../chain/port.js';
import type { Db } from '../../db/knex.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import { findOperation, listOperations, type OperationRow, type OperationStatus } from '../../db/repositories/operation.repository.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import type { Chains } from './chains.js';
import { USD_DECIMALS, type LedgerService } from './ledger.js';

export interface PublicOperation {
  id: string;
  type: string;
  status: OperationStatus;
  resource: { type: string; id: string };
  asset_symbol: string | null;
  amount: string | null;
  amount_usd: string | null;
  fee_usd: string;
  human_message: string;
  idempotency_key_hash: string | null;
  error: { code: string; message: string } | null;
  created_at: string;
  submitted_at: string | null;
  executed_at: string | null;
  failed_at: string | null;
  onchain?: OnchainView;
}

export interface WriteResponse {
  ok: true;
  operation_id: string;
  status: OperationStatus;
  resource: { type: string; id: string };
  fee_usd: string;
  human_message: string;
}

export interface OperationViews {
  get(db: Db, agentId: string, id: string, opts?: { types?: string[]; include?: string[] }): Promise<PublicOperation>;
  list(db: Db, agentId: string, query: { cursor?: string; limit?: unknown; status?: string; type?: string; since?: string; types?: string[] }): Promise<ListPage<PublicOperation>>;
  toPublic(db: Db, op: OperationRow, opts?: { onchain?: boolean }): Promise<PublicOperation>;
  writeResponse(op: OperationRow): WriteResponse;
}

const usd = (v: string | bigint | null): string | null => (v === null ? null : formatAmount(BigInt(v), USD_DECIMALS));
const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function createOperationViews(deps: { ledger: LedgerService; chains: Chains }): OperationViews {
  const { ledger, chains } = deps;

  async function decimalsOf(db: Db, symbol: string | null): Promise<number | null> {
    if (!symbol) return null;
    return (await ledger.assets(db)).get(symbol)?.decimals ?? null;
  }

  const views: OperationViews = {
    async get(db, agentId, id, opts = {}) {
      const op = await findOperation(db, agentId, id);
      if (!op || (opts.types && !opts.types.includes(op.type))) throw new ApiError('not_found', 'operation not found');
      return views.toPublic(db, op, { onchain: opts.include?.includes('onchain') ?? false });
    },

    async list(db, agentId, query) {
      const limit = pageLimit(query.limit);
      let since: Date | undefined;
      if (query.since) {
        since = new Date(query.since);
        if (Number.isNaN(since.getTime())) throw new ApiError('validation_failed', 'since must be an ISO 8601 timestamp', { field: 'since' });
      }
      const types = query.type ? (query.types && !query.types.includes(query.type) ? [] : [query.type]) : query.types;
      const rows = types && types.length === 0 ? [] : await listOperations(db, { agentId, types, status: query.status, since, before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      return { ...page, items: await Promise.all(page.items.map((r) => views.toPublic(db, r))) };
    },

    async toPublic(db, op, opts = {}) {
      const decimals = await decimalsOf(db, op.asset_symbol);
      const out: PublicOperation = {
        id: op.id,
        type: op.type,
        status: op.status,
        resource: { type: op.resource_type, id: op.resource_id },
        asset_symbol: op.asset_symbol,
        amount: op.amount === null || decimals === null ? null : formatAmount(BigInt(op.amount), decimals),
        amount_usd: usd(op.amount_usd_e8),
        fee_usd: usd(op.fee_usd_e8) ?? '0',
        human_message: op.human_message,
        idempotency_key_hash: op.idempotency_key_hash,
        error: op.error_code ? { code: op.error_code, message: op.error_message ?? '' } : null,
        created_at: op.created_at.toISOString(),
        submitted_at: iso(op.submitted_at),
        executed_at: iso(op.executed_at),
        failed_at: iso(op.failed_at),
      };
      if (opts.onchain) {
        const wallet = await findWalletByAgent(db, op.agent_id);
        out.onchain = await (await chains.adapterFor(db, op)).onchain(db, op, wallet?.address ?? null);
      }
      return out;
    },

    writeResponse(op) {
      return { ok: true, operation_id: op.id, status: op.status, resource: { type: op.resource_type, id: op.resource_id }, fee_usd: usd(op.fee_usd_e8) ?? '0', human_message: op.human_message };
    },
  };
  return views;
}
