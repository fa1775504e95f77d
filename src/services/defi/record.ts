// The last step of every DeFi write: record the operation (the policy decides there) and book its effects, or answer
// the policy's refusal.
import type { Db } from '../../db/knex.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import { isRefusal, type Refusal } from '../../lib/refusal.js';
import type { CreateOperationInput, OperationService, WriteResponse } from '../ledger/operations.js';

/**
 * Records the operation and, unless the policy refused it, books its effects with `book` in the same transaction. A
 * refusal stops the write there: its policy_rejected operation commits with the transaction, nothing else is written.
 */
export async function recordWrite(operations: OperationService, trx: Db, input: CreateOperationInput, book?: (operation: OperationRow) => Promise<void>): Promise<WriteResponse | Refusal> {
  const created = await operations.create(trx, input);
  if (isRefusal(created)) return created;
  if (book) await book(created.operation);
  return operations.writeResponse(created.operation);
}
