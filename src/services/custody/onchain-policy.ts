// The owner's policy as an AgentAccount holds it (issue 24): the database's policy (the mirror and fast first gate)
// mapped to `setPolicy`'s arguments, the account's caps and usage read back for /self/limits, and the drift between
// the two that `agentctl chain reconcile` reports.
import type { Chain } from '../../chain/port.js';
import { NATIVE_TOKEN } from '../../chain/accounts.js';
import { LENDING_SETTING, type LendingContracts } from '../../chain/lending.js';
import { NO_TX_CAP, NO_USD_CAP, PERIOD_CODE, type CustodyContracts, type OnchainPolicy } from '../../chain/custody.js';
import { DEV_CHAIN_ID } from '../../chain/dev-accounts.js';
import type { Address, Hex } from '../../chain/hex.js';
import type { Db } from '../../db/knex.js';
import { findSetting } from '../../db/repositories/chain.repository.js';
import { findRecipient, listRecipientAddresses } from '../../db/repositories/recipient.repository.js';
import { listPaidAddresses } from '../../db/repositories/approval.repository.js';
import { listAssets } from '../../db/repositories/ledger.repository.js';
import { formatAmount } from '../../lib/money.js';
import { viem } from '../../lib/viem.js';
import { isEvmAddress } from '../../lib/wallet-keys.js';
import { USD_DECIMALS } from '../ledger/ledger.js';
import { periodStart, type Period, type Policy, type CoreLimits } from '../ledger/policy.js';
import { policyHashOf, type AccountState } from '../../chain/accounts.js';
import { listAccountWallets, listDestinationStates } from '../../db/repositories/custody.repository.js';

/** Operation types that move money out of the wallet: a policy allowing none of them caps every lane call at 0. */
const MONEY_TYPES = [
  'payment',
  'one_off_payment.create',
  'withdrawal.crypto',
  'conversion',
  'earn.deposit',
  'earn.withdraw',
  'earn.move',
  'debt.borrow',
  'debt.repay',
  'collateral.add',
  'collateral.remove',
  'x402.sign',
  'x402.purchase',
];

/** A chain's contracts the lane may call, by protocol id (routers, vaults, Morpho) and the Morpho market ids. */
export type ProtocolAddresses = (db: Db) => Promise<Map<string, Address[]>>;

const listed = (list: string[] | 'all' | undefined, value: string) => list === undefined || list === 'all' || list.includes(value);

/**
 * `setPolicy`'s arguments for `p`: caps in USD (8 decimals, as the database), the allowed assets with their feeds
 * (ETH as the native coin), the allowed protocols' contracts and markets, and the payees: the listed recipients, or
 * without `allowed_recipients` the addresses of the agent's owner-added recipients (issue 26's approved payees; the
 * confirmed trusted destinations are the account's own time-locked set). Only `allowed_recipients: all` is
 * `anyRecipient`. `extraPayee`: a recipient about to be added (its row is written once the account holds it).
 * `approve_new_payees` is `approveNewPayees`, and then `paidBefore` lists the addresses the database counts as paid
 * before (hasPaidBefore), so that payees paid before the flag (or before the account) are not new on chain either;
 * the owner signs that list with the policy (docs/CUSTODY.md).
 */
export async function toOnchainPolicy(
  db: Db,
  deps: { chain: Chain; contracts: CustodyContracts; protocols: ProtocolAddresses },
  agentId: string,
  p: Policy,
  extraPayee?: string,
): Promise<OnchainPolicy> {
  const allowsMoney = p.operation_types === 'all' || MONEY_TYPES.some((t) => (p.operation_types as string[]).includes(t));
  const cap = (v: bigint | undefined) => (!allowsMoney ? 0n : (v ?? NO_USD_CAP));
  const maxPriceAge = deps.chain.chainId === DEV_CHAIN_ID ? 0 : 90_000;
  const assets = [];
  let weth: Address | null = null;
  for (const a of await listAssets(db)) {
    const feed = deps.contracts.feeds[a.symbol];
    if (!feed || !listed(p.allowed_assets, a.symbol)) continue;
    if (a.symbol !== 'ETH' && (!a.contract_address || !(await deps.chain.custody!.hasCode(viem().getAddress(a.contract_address) as Address)))) continue;
    assets.push({ token: a.symbol === 'ETH' ? NATIVE_TOKEN : viem().getAddress(a.contract_address!), feed: viem().getAddress(feed), maxPriceAge });
    if (a.symbol === 'WETH') weth = viem().getAddress(a.contract_address!) as Address;
  }
  const protocols: Address[] = [];
  // Issue 30: with ETH and WETH both allowed, the WETH contract is a protocol too: the lane wraps and unwraps through it.
  if (weth && assets.some((x) => x.token === NATIVE_TOKEN)) protocols.push(weth);
  const markets: Hex[] = [];
  for (const [id, addresses] of await deps.protocols(db)) {
    if (!listed(p.allowed_protocols, id)) continue;
    for (const address of addresses) if (!protocols.includes(address)) protocols.push(address);
    if (id === 'morpho') {
      const lending = await findSetting(db, deps.chain.chainId, LENDING_SETTING);
      if (lending) markets.push((JSON.parse(lending) as LendingContracts).market.id);
    }
  }
  const payees: Address[] = [];
  if (Array.isArray(p.allowed_recipients)) {
    for (const entry of p.allowed_recipients) {
      if (isEvmAddress(entry)) payees.push(viem().getAddress(entry));
      else if (/^[0-9a-f-]{36}$/i.test(entry)) {
        const r = await findRecipient(db, agentId, entry);
        if (r?.address && isEvmAddress(r.address)) payees.push(viem().getAddress(r.address));
      }
    }
  } else if (p.allowed_recipients === undefined) {
    const addresses = await listRecipientAddresses(db, agentId);
    if (extraPayee) addresses.push(extraPayee.toLowerCase());
    for (const address of [...new Set(addresses)].sort()) if (isEvmAddress(address)) payees.push(viem().getAddress(address));
  }
  return {
    limits: {
      perTxUsd: cap(p.per_tx_usd),
      perPeriodUsd: cap(p.per_period_usd),
      lifetimeUsd: cap(p.lifetime_usd),
      maxTxsPerPeriod: allowsMoney ? (p.max_txs_per_period ?? NO_TX_CAP) : 0,
      cooldownBlocks: p.tx_cooldown_blocks ?? 0,
      period: PERIOD_CODE[p.period],
      maxSlippageBps: p.max_slippage_bps ?? 10_000,
      maxLtvBps: p.max_ltv_bps ?? 10_000,
      failOnZeroPrice: true,
      anyRecipient: p.allowed_recipients === 'all',
      minChequeDelay: 0,
      approvalThresholdUsd: p.approval_threshold_usd ?? NO_USD_CAP,
      maxSwapsPerPeriod: p.max_swaps_per_period ?? NO_TX_CAP,
      approveNewPayees: p.approve_new_payees === true,
    },
    assets,
    protocols: [...new Set(protocols.map((x) => viem().getAddress(x)))],
    markets,
    payees: [...new Set(payees)],
    paidBefore: p.approve_new_payees === true ? (await listPaidAddresses(db, agentId)).filter(isEvmAddress).map((a) => viem().getAddress(a) as Address) : [],
  };
}

const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);
const PERIODS: Record<number, Period> = { 1: 'day', 2: 'week', 3: 'month' };

/**
 * /self/limits of an account wallet: the caps and usage the account holds (what the contract enforces), the
 * allow-lists of the mirror (the chain holds them as sets it answers one by one).
 */
export function limitsFromChain(state: AccountState, mirror: CoreLimits, now: Date): CoreLimits {
  if (!state.deployed || !state.limits || !state.usage) {
    // Not deployed yet: nothing can move; the caps are zero until the owner signs a policy.
    const start = periodStart('day', now);
    return {
      limits: { ...mirror.limits, per_tx_usd: '0', per_period_usd: '0', lifetime_usd: '0', max_txs_per_period: 0 },
      usage: { period_start: start.toISOString(), period_usd: '0', period_txs: 0, lifetime_usd: '0' },
      exposure_usd: '0',
      swaps: { max_swaps_per_period: 0, swaps_in_period: 0 },
    };
  }
  const l = state.limits;
  const u = state.usage;
  const capOf = (v: bigint) => (v === NO_USD_CAP ? null : usd(v));
  return {
    limits: {
      ...mirror.limits,
      per_tx_usd: capOf(l.perTxUsd),
      per_period_usd: capOf(l.perPeriodUsd),
      lifetime_usd: capOf(l.lifetimeUsd),
      max_txs_per_period: l.maxTxsPerPeriod === NO_TX_CAP ? null : l.maxTxsPerPeriod,
      period: PERIODS[l.period] ?? mirror.limits.period,
      max_slippage_bps: l.maxSlippageBps === 10_000 && mirror.limits.max_slippage_bps === null ? null : l.maxSlippageBps,
      max_ltv_bps: l.maxLtvBps === 10_000 && mirror.limits.max_ltv_bps === null ? null : l.maxLtvBps,
      approval_threshold_usd: capOf(l.approvalThresholdUsd),
      approve_new_payees: l.approveNewPayees,
    },
    usage: { period_start: new Date(Number(u.periodStart) * 1000).toISOString(), period_usd: usd(u.periodUsd), period_txs: u.periodTxs, lifetime_usd: usd(u.lifetimeUsd) },
    // No USD cap at all leaves the remaining allowance near 2^256: unbounded, shown as null (the whole account is exposed).
    exposure_usd: (state.allowance?.exposureUsd ?? 0n) >= NO_USD_CAP / 2n ? null : usd(state.allowance?.exposureUsd ?? 0n),
    swaps: { max_swaps_per_period: l.maxSwapsPerPeriod === NO_TX_CAP ? null : l.maxSwapsPerPeriod, swaps_in_period: u.periodSwaps },
  };
}

/**
 * Policy drift (agentctl chain reconcile): per account, the database's policy against the account's policy hash (which
 * covers every limit, approveNewPayees too), the addresses the database counts as paid before that the account does
 * not under approve_new_payees, the trusted destinations the database shows confirmed that the account would not pay (not added on chain, or
 * still time-locked), and, for a policy without allowed_recipients, the recipients the account does not list as
 * payees. Each row names the agent, what differs, and both sides.
 */
export async function policyDrift(
  db: Db,
  deps: {
    chain: Chain;
    contracts: CustodyContracts;
    protocols: ProtocolAddresses;
    custody: { state(account: string): Promise<AccountState> };
    policy: { get(db: Db, agentId: string): Promise<Policy | null> };
    now: Date;
  },
  agentId?: string,
): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (const acct of await listAccountWallets(db, agentId)) {
    const state = await deps.custody.state(acct.address);
    const policy = await deps.policy.get(db, acct.agent_id);
    const expected = policy ? policyHashOf(await toOnchainPolicy(db, deps, acct.agent_id, policy)) : null;
    const onchain = state.deployed && state.policyVersion > 0n ? state.policyHash : null;
    if (expected !== onchain)
      rows.push({
        agent_id: acct.agent_id,
        account: acct.address,
        kind: 'policy',
        database: expected,
        onchain,
        message: "the database's policy is not the one the account holds: the account enforces its own",
      });
    // The owner on chain against the mirror's signer (the owner's key, or the passkey signer it was handed to).
    if (state.owner && acct.signer_address && acct.signer_address.toLowerCase() !== state.owner.toLowerCase())
      rows.push({ agent_id: acct.agent_id, account: acct.address, kind: 'owner', database: acct.signer_address, onchain: state.owner });
    if (state.lane && acct.lane_address.toLowerCase() !== state.lane.toLowerCase())
      rows.push({ agent_id: acct.agent_id, account: acct.address, kind: 'lane', database: acct.lane_address, onchain: state.lane });
    if (policy && policy.allowed_recipients === undefined && state.deployed)
      for (const address of await listRecipientAddresses(db, acct.agent_id)) {
        if (!isEvmAddress(address) || (await deps.chain.custody!.readPayee(acct.address as Address, viem().getAddress(address) as Address))) continue;
        rows.push({
          agent_id: acct.agent_id,
          account: acct.address,
          kind: 'payee',
          address: viem().getAddress(address),
          database: 'recipient',
          onchain: 'not_payee',
          message: 'a recipient in the database that the account does not list as payee: the account refuses to pay it',
        });
      }
    // approve_new_payees: an address the database counts as paid before but the account does not is a new payee on
    // chain, so its next transfer needs the owner's ApproveSpend (the database would not ask for one).
    if (policy?.approve_new_payees && state.deployed)
      for (const address of await listPaidAddresses(db, acct.agent_id)) {
        if (!isEvmAddress(address) || (await deps.chain.custody!.readPaidBefore(acct.address as Address, viem().getAddress(address) as Address))) continue;
        rows.push({
          agent_id: acct.agent_id,
          account: acct.address,
          kind: 'paid_before',
          address: viem().getAddress(address),
          database: 'paid_before',
          onchain: 'new_payee',
          message: "an address the database counts as paid before that the account does not: the account refuses its next transfer without the owner's approval",
        });
      }
    for (const d of await listDestinationStates(db, acct.agent_id)) {
      if (d.status !== 'confirmed') continue;
      const unlockAt = state.deployed ? await deps.chain.custody!.readTrusted(acct.address as Address, viem().getAddress(d.address) as Address) : 0n;
      const nowSeconds = BigInt(Math.floor(deps.now.getTime() / 1000));
      if (unlockAt === 0n || unlockAt > nowSeconds)
        rows.push({
          agent_id: acct.agent_id,
          account: acct.address,
          kind: 'trusted_destination',
          destination_id: d.id,
          address: d.address,
          database: 'confirmed',
          onchain: unlockAt === 0n ? 'not_trusted' : `time_locked_until_${new Date(Number(unlockAt) * 1000).toISOString()}`,
        });
    }
  }
  return rows;
}
