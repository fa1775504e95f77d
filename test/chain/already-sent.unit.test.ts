// A broadcast the node refuses because it already has the transaction is a sent transaction (src/chain/evm/transactions.ts
// isAlreadySent). The relayer's own sends (src/chain/evm-custody.ts sendAndWait: account and passkey-signer deployments,
// owner changes) record the transaction before sending it, so a worker's broadcaster can send it first; Anvil then
// answered ours with "transaction already imported", which failed chain/faults once in a loaded suite run.
import { expect } from 'chai';
import { InternalRpcError, RpcRequestError, TransactionRejectedRpcError } from 'viem';
import { isAlreadySent } from '../../src/chain/evm/transactions.js';

/** The error viem raises for a JSON-RPC error answer to eth_sendRawTransaction. */
const refused = (message: string, code = -32003) =>
  new TransactionRejectedRpcError(new RpcRequestError({ body: { method: 'eth_sendRawTransaction', params: ['0x02'] }, error: { code, message }, url: 'http://127.0.0.1:8545' }));

describe('a broadcast refused as already sent', () => {
  it("is Anvil's and geth's answers to a transaction the node already has (or one at its nonce)", () => {
    for (const message of ['transaction already imported', 'already known', 'nonce too low', 'replacement transaction underpriced']) expect(isAlreadySent(refused(message)), message).to.equal(true);
  });

  it('is not any other refusal', () => {
    for (const message of ['insufficient funds for gas * price + value', 'intrinsic gas too low', 'execution reverted']) expect(isAlreadySent(refused(message)), message).to.equal(false);
    expect(isAlreadySent(new InternalRpcError(new Error('boom')))).to.equal(false);
    expect(isAlreadySent(undefined)).to.equal(false);
  });
});
