// Internal ETH transfers from a block's traces: every frame below a transaction's top call that moved ETH (CALL with
// value, CREATE/CREATE2 with an endowment, SELFDESTRUCT's refund) and neither failed nor sits under a frame that
// failed. DELEGATECALL and CALLCODE move nothing between accounts; STATICCALL carries no value. Two formats: the
// parity-style flat list of `trace_block` (Anvil, Reth, Erigon, Nethermind) and the nested frames of Geth's
// `debug_traceBlockByHash` with the callTracer. Both list frames depth first, so a transaction's transfers are
// numbered alike.
import { viem } from '../../lib/viem.js';
import type { Address, Hex, InternalTransfer } from '../port.js';

export interface ParityTrace {
  type: string;
  action: { callType?: string; from?: string; to?: string; value?: string; address?: string; refundAddress?: string; balance?: string };
  result?: { address?: string } | null;
  error?: string;
  traceAddress: number[];
  transactionHash: string | null;
  blockHash: string;
  blockNumber: number;
}

function moved(t: ParityTrace): { from: string; to: string; value: bigint } | null {
  const { action } = t;
  if (t.type === 'call' && action.callType === 'call' && action.from && action.to) return { from: action.from, to: action.to, value: BigInt(action.value ?? 0) };
  if (t.type === 'create' && action.from && t.result?.address) return { from: action.from, to: t.result.address, value: BigInt(action.value ?? 0) };
  if (t.type === 'suicide' && action.address && action.refundAddress) return { from: action.address, to: action.refundAddress, value: BigInt(action.balance ?? 0) };
  return null;
}

/** The internal transfers of a block, numbered per transaction in trace order (the `index` of InternalTransfer). */
export function internalTransfersOf(traces: ParityTrace[]): InternalTransfer[] {
  const failed = new Set<string>();
  for (const t of traces) if (t.error && t.transactionHash) failed.add(`${t.transactionHash}:${t.traceAddress.join(',')}`);
  const underFailure = (t: ParityTrace) =>
    t.traceAddress.some((_, i) => failed.has(`${t.transactionHash}:${t.traceAddress.slice(0, i).join(',')}`)) || failed.has(`${t.transactionHash}:${t.traceAddress.join(',')}`);
  const counts = new Map<string, number>();
  const out: InternalTransfer[] = [];
  for (const t of traces) {
    if (!t.transactionHash || t.traceAddress.length === 0) continue;
    const m = moved(t);
    if (!m || m.value <= 0n || underFailure(t)) continue;
    const index = counts.get(t.transactionHash) ?? 0;
    counts.set(t.transactionHash, index + 1);
    out.push({
      from: viem().getAddress(m.from) as Address,
      to: viem().getAddress(m.to) as Address,
      value: m.value,
      txHash: t.transactionHash as Hex,
      index,
      blockNumber: BigInt(t.blockNumber),
      blockHash: t.blockHash as Hex,
    });
  }
  return out;
}

export interface CallFrame {
  type: string;
  from: string;
  to?: string;
  value?: string;
  error?: string;
  calls?: CallFrame[];
}

/** The same from Geth's callTracer: `debug_traceBlockByHash(hash, { tracer: 'callTracer' })` (the hash pins the block). */
export function internalTransfersOfCallFrames(traces: { txHash: string; result: CallFrame }[], block: { number: bigint; hash: Hex }): InternalTransfer[] {
  const out: InternalTransfer[] = [];
  for (const { txHash, result } of traces) {
    let index = 0;
    const walk = (frame: CallFrame, depth: number) => {
      if (frame.error) return;
      const value = BigInt(frame.value ?? 0);
      const moves = frame.type === 'CALL' || frame.type === 'CREATE' || frame.type === 'CREATE2' || frame.type === 'SELFDESTRUCT';
      if (depth > 0 && moves && value > 0n && frame.to) {
        out.push({
          from: viem().getAddress(frame.from) as Address,
          to: viem().getAddress(frame.to) as Address,
          value,
          txHash: txHash as Hex,
          index: index++,
          blockNumber: block.number,
          blockHash: block.hash,
        });
      }
      for (const c of frame.calls ?? []) walk(c, depth + 1);
    };
    walk(result, 0);
  }
  return out;
}
