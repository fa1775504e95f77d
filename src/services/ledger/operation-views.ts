// Operations as the document shows them: one operation, a page of them, and the answer of an accepted write.
import type { Db } from '../../db/knex.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import { findOperation, listOperations, type OperationRow } from '../../db/repositories/operation.repository.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import { approvalView } from './approval-request.js';
import type { Chains } from './chains.js';
import { USD_DECIMALS, type LedgerService } from './ledger.js';

/** An operation as the document shows it. */
export type PublicOperation = Schema<'Operation'>;
/** The answer of an accepted write. */
export type WriteResponse = Schema<'WriteResponse'>;

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
        type: op.type as PublicOperation['type'],
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
      const approval = approvalView(op);
      if (approval) out.approval = approval;
      if (opts.onchain) {
        const wallet = await findWalletByAgent(db, op.agent_id);
        const view = await (await chains.adapterFor(db, op)).onchain(db, op, wallet?.address ?? null);
        // The port types wallet_address as nullable; the document requires it (every operation's wallet has an address).
        out.onchain = { ...view, wallet_address: view.wallet_address ?? '' };
      }
      return out;
    },

    writeResponse(op) {
      const out: WriteResponse = {
        ok: true,
        operation_id: op.id,
        status: op.status,
        resource: { type: op.resource_type, id: op.resource_id },
        fee_usd: usd(op.fee_usd_e8) ?? '0',
        human_message: op.human_message,
      };
      const approval = approvalView(op);
      if (approval) out.approval = approval;
      return out;
    },
  };
  return views;
}
