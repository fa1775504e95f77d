// Internal ETH transfers from a block's parity-style traces (`trace_block`): every frame below a transaction's top
// call that moved ETH (CALL with value, CREATE with an endowment, SELFDESTRUCT's refund) and neither failed nor sits
// under a frame that failed. DELEGATECALL and CALLCODE move nothing between accounts; STATICCALL carries no value.
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
