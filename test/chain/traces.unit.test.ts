// Internal ETH transfers from traces (issue 30 item 5): both trace formats give the same transfers, numbered per
// transaction depth first, without the top call, delegate/static calls, zero values, or anything under a failed frame.
import { expect } from 'chai';
import { internalTransfersOf, internalTransfersOfCallFrames, type CallFrame, type ParityTrace } from '../../src/chain/evm/traces.js';

const A = '0x00000000000000000000000000000000000000aa';
const B = '0x00000000000000000000000000000000000000bb';
const C = '0x00000000000000000000000000000000000000cc';
const W = '0x00000000000000000000000000000000000000dd';
const TX = '0x' + '11'.repeat(32);
const BLOCK = { number: 7n, hash: ('0x' + '22'.repeat(32)) as `0x${string}` };

// tx: EOA -> A (1 wei, top call); A -> W 5 (call); A delegatecalls B with 9; A -> C 3 (fails; C -> W 4 under it);
// A -> W 0; A -> W 6 (call); A creates a contract with 2; the contract selfdestructs to W with 2.
const frames: CallFrame = {
  type: 'CALL',
  from: C,
  to: A,
  value: '0x1',
  calls: [
    { type: 'CALL', from: A, to: W, value: '0x5' },
    { type: 'DELEGATECALL', from: A, to: B, value: '0x9' },
    { type: 'CALL', from: A, to: C, value: '0x3', error: 'execution reverted', calls: [{ type: 'CALL', from: C, to: W, value: '0x4' }] },
    { type: 'CALL', from: A, to: W, value: '0x0' },
    { type: 'CALL', from: A, to: W, value: '0x6' },
    { type: 'CREATE', from: A, to: B, value: '0x2', calls: [{ type: 'SELFDESTRUCT', from: B, to: W, value: '0x2' }] },
  ],
};
const parity = (traceAddress: number[], type: string, action: ParityTrace['action'], extra: Partial<ParityTrace> = {}): ParityTrace => ({
  type,
  action,
  traceAddress,
  transactionHash: TX,
  blockHash: BLOCK.hash,
  blockNumber: 7,
  ...extra,
});
const flat: ParityTrace[] = [
  parity([], 'call', { callType: 'call', from: C, to: A, value: '0x1' }),
  parity([0], 'call', { callType: 'call', from: A, to: W, value: '0x5' }),
  parity([1], 'call', { callType: 'delegatecall', from: A, to: B, value: '0x9' }),
  parity([2], 'call', { callType: 'call', from: A, to: C, value: '0x3' }, { error: 'Reverted' }),
  parity([2, 0], 'call', { callType: 'call', from: C, to: W, value: '0x4' }),
  parity([3], 'call', { callType: 'call', from: A, to: W, value: '0x0' }),
  parity([4], 'call', { callType: 'call', from: A, to: W, value: '0x6' }),
  parity([5], 'create', { from: A, value: '0x2' }, { result: { address: B } }),
  parity([5, 0], 'suicide', { address: B, refundAddress: W, balance: '0x2' }),
];

describe('internal ETH transfers from traces', () => {
  it('reads trace_block and the callTracer alike', () => {
    const fromParity = internalTransfersOf(flat);
    const fromGeth = internalTransfersOfCallFrames([{ txHash: TX, result: frames }], BLOCK);
    const summary = fromParity.map((t) => [t.from.toLowerCase(), t.to.toLowerCase(), t.value, t.index]);
    expect(summary).to.deep.equal([
      [A, W, 5n, 0],
      [A, W, 6n, 1],
      [A, B, 2n, 2],
      [B, W, 2n, 3],
    ]);
    expect(fromGeth).to.deep.equal(fromParity);
    expect(fromParity.every((t) => t.blockHash === BLOCK.hash && t.blockNumber === 7n && t.txHash === TX)).to.equal(true);
  });

  it('gives nothing for a transaction whose top call failed', () => {
    const failed = flat.map((t, i) => (i === 0 ? { ...t, error: 'Reverted' } : t));
    expect(internalTransfersOf(failed)).to.deep.equal([]);
    expect(internalTransfersOfCallFrames([{ txHash: TX, result: { ...frames, error: 'execution reverted' } }], BLOCK)).to.deep.equal([]);
  });
});
