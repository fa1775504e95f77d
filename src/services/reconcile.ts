// Reconciliation (evm mode): each wallet's on-chain balances against the ledger. The chain should show
// available + held, less what the chain has already moved out for operations the ledger has not settled yet
// (mined transactions of open operations: their amount and, for the wallet's own transactions, the gas; x402
// authorizations already used by a seller while their operation is open).
// Anything else is drift: a transfer straight from the wallet's key, a deposit not yet credited, a bug.
// The report also lists each wallet's deficits (reversed deposits it had already spent, deficits.ts).
// Earn positions in on-chain ERC-4626 vaults are reconciled too: the wallet's shares (`balanceOf`) against the
// position's shares in the ledger (drift rows with asset `shares:<vault address>`), and so is the Morpho Blue
// position: the wallet's borrow shares and collateral on chain against the ledger's debt and collateral rows (drift
// rows with asset `borrow_shares:<morpho>`, in raw shares, and `collateral:<morpho>`, in the collateral asset).
import type { Hex } from 'viem';
import { viem } from '../lib/viem.js';
import type { Db } from '../db/knex.js';
import * as repo from '../db/repositories/deposit.repository.js';
import { listDeficits } from '../db/repositories/deficit.repository.js';
import { listAssets, type AssetRow } from '../db/repositories/ledger.repository.js';
import { listOpenOperationsOnChain } from '../db/repositories/operation.repository.js';
import { findVault, listAllPositions } from '../db/repositories/vault.repository.js';
import { listCollateral, listDebts } from '../db/repositories/market.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { formatAmount } from '../lib/money.js';
import type { Address } from '../chain/port.js';
import type { ChainReads } from '../chain/reads.js';

export interface Drift {
  agent_id: string;
  wallet_id: string;
  address: string;
  asset: string;
  /** Balance on the chain (decimal). */
  onchain: string;
  /** available + held in the ledger (decimal). */
  ledger: string;
  /** Mined for open operations, not yet settled in the ledger (decimal). */
  outgoing_unsettled: string;
  /** What the chain should show: ledger − outgoing_unsettled (decimal). */
  expected_onchain: string;
  /** onchain − expected_onchain (decimal, signed). */
  difference: string;
  /** The same difference in base units. */
  difference_units: string;
}

export interface ReconcileReport {
  chain_id: number;
  checked_at: string;
  wallets_checked: number;
  assets: string[];
  drift_count: number;
  drift: Drift[];
  /** What wallets owe after reversed deposits they had spent (their money writes are refused until covered). */
  deficits: { agent_id: string; wallet_id: string; address: string; asset: string; amount: string }[];
}

export interface Reconciler {
  run(opts?: { agentId?: string }): Promise<ReconcileReport>;
}

const signed = (units: bigint, decimals: number) => (units < 0n ? `-${formatAmount(-units, decimals)}` : formatAmount(units, decimals));

export function createReconciler(deps: { db: Db; chain: ChainReads; clock: Clock; isDeployed(address: Address): Promise<boolean> }): Reconciler {
  const { db, chain, clock } = deps;

  async function chainAssets(): Promise<AssetRow[]> {
    const out: AssetRow[] = [];
    for (const a of await listAssets(db)) {
      if (a.contract_address === null ? a.symbol === 'ETH' : await deps.isDeployed(a.contract_address as Address)) out.push(a);
    }
    return out;
  }

  /** Per asset symbol: what the chain has moved out of `address` for open operations. */
  async function unsettled(walletId: string, address: string, assets: AssetRow[]): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    const add = (symbol: string | undefined, units: bigint) => symbol && out.set(symbol, (out.get(symbol) ?? 0n) + units);
    const bySymbolOfToken = new Map(assets.filter((a) => a.contract_address).map((a) => [a.contract_address!.toLowerCase(), a.symbol]));
    const eth = assets.find((a) => a.contract_address === null)?.symbol;
    for (const t of await repo.listMinedUnsettled(db, chain.chainId, walletId)) {
      const fromWallet = t.from_address.toLowerCase() === address.toLowerCase();
      if (fromWallet && t.gas_used !== null && t.effective_gas_price !== null) add(eth, BigInt(t.gas_used) * BigInt(t.effective_gas_price));
      if (t.receipt_status !== 1) continue;
      if (t.kind === 'native' && fromWallet) add(eth, t.transfer_value !== null ? BigInt(t.transfer_value) : (viem().parseTransaction(t.raw_tx as Hex).value ?? 0n));
      if (t.kind === 'eip3009' && t.token_address && t.transfer_value !== null) add(bySymbolOfToken.get(t.token_address.toLowerCase()), BigInt(t.transfer_value));
      // A swap or a vault deposit mined before its operation settles: its input already left the wallet.
      if ((t.kind === 'swap' || t.kind === 'vault') && t.token_address && t.transfer_value !== null) add(bySymbolOfToken.get(t.token_address.toLowerCase()), BigInt(t.transfer_value));
    }
    // x402 authorizations a seller already used on chain, before the tracking loop settles their operations.
    for (const op of await listOpenOperationsOnChain(db, ['x402.sign', 'x402.purchase'], chain.chainId, 1000, walletId)) {
      const d = op.details as { token?: string; authorizer?: string; nonce?: string };
      if (!d.token || !d.authorizer || !d.nonce || op.amount === null) continue;
      if (await chain.authorizationUsed(d.token as Address, d.authorizer as Address, d.nonce as Hex)) add(bySymbolOfToken.get(d.token.toLowerCase()), BigInt(op.amount));
    }
    return out;
  }

  /** Positions in on-chain vaults: the wallet's shares on chain against the position's shares in the ledger. */
  async function shareDrift(w: { agent_id: string; wallet_id: string; address: string }, assets: AssetRow[]): Promise<Drift[]> {
    const out: Drift[] = [];
    for (const p of await listAllPositions(db, w.wallet_id)) {
      const v = await findVault(db, p.vault_id);
      if (!v || !(await chain.earn!.isOnchain(db, v.address))) continue;
      const decimals = (assets.find((a) => a.symbol === v.asset_symbol)?.decimals ?? 0) + v.decimals_offset;
      const onchain = await chain.earn!.sharesOf(viem().getAddress(v.address), viem().getAddress(w.address));
      const ledger = BigInt(p.shares);
      if (onchain === ledger) continue;
      out.push(positionDrift(w, `shares:${viem().getAddress(v.address)}`, onchain, ledger, decimals));
    }
    return out;
  }

  /** The Morpho Blue position: borrow shares and collateral on chain against the ledger's debt and collateral rows. */
  async function lendingDrift(w: { agent_id: string; wallet_id: string; address: string }, assets: AssetRow[]): Promise<Drift[]> {
    const c = await chain.lending!.contracts(db);
    if (!c) return [];
    const loan = assets.find((a) => a.contract_address?.toLowerCase() === c.market.params.loanToken.toLowerCase());
    const coll = assets.find((a) => a.contract_address?.toLowerCase() === c.market.params.collateralToken.toLowerCase());
    if (!loan || !coll) return [];
    const p = await chain.lending!.position(c, viem().getAddress(w.address));
    const debtRow = (await listDebts(db, w.wallet_id)).find((d) => d.asset_symbol === loan.symbol);
    const collRow = (await listCollateral(db, w.wallet_id)).find((r) => r.asset_symbol === coll.symbol);
    const out: Drift[] = [];
    const row = (asset: string, onchain: bigint, ledger: bigint, decimals: number): Drift => positionDrift(w, asset, onchain, ledger, decimals);
    const ledgerShares = BigInt(debtRow?.scaled_amount ?? 0);
    if (p.borrowShares !== ledgerShares) out.push(row(`borrow_shares:${viem().getAddress(c.morpho)}`, p.borrowShares, ledgerShares, 0));
    const ledgerCollateral = BigInt(collRow?.amount ?? 0);
    if (p.collateral !== ledgerCollateral) out.push(row(`collateral:${viem().getAddress(c.morpho)}`, p.collateral, ledgerCollateral, coll.decimals));
    return out;
  }

  return {
    async run(opts = {}) {
      const assets = await chainAssets();
      const wallets = await repo.listWalletsWithAddress(db, opts.agentId);
      const drift: Drift[] = [];
      const deficits: ReconcileReport['deficits'] = [];
      const decimals = new Map(assets.map((a) => [a.symbol, a.decimals]));
      for (const w of wallets) {
        for (const d of await listDeficits(db, w.wallet_id)) {
          deficits.push({ agent_id: w.agent_id, wallet_id: w.wallet_id, address: w.address, asset: d.asset_symbol, amount: formatAmount(BigInt(d.amount), decimals.get(d.asset_symbol) ?? 0) });
        }
        const totals = await repo.walletLedgerTotals(db, w.wallet_id);
        const outgoing = await unsettled(w.wallet_id, w.address, assets);
        for (const asset of assets) {
          const onchain = await chain.balanceOf(viem().getAddress(w.address), asset);
          const ledger = totals.get(asset.symbol) ?? 0n;
          const out = outgoing.get(asset.symbol) ?? 0n;
          const expected = ledger - out;
          if (onchain === expected) continue;
          drift.push({
            agent_id: w.agent_id,
            wallet_id: w.wallet_id,
            address: w.address,
            asset: asset.symbol,
            onchain: formatAmount(onchain, asset.decimals),
            ledger: formatAmount(ledger, asset.decimals),
            outgoing_unsettled: formatAmount(out, asset.decimals),
            expected_onchain: signed(expected, asset.decimals),
            difference: signed(onchain - expected, asset.decimals),
            difference_units: (onchain - expected).toString(),
          });
        }
        if (chain.earn) drift.push(...(await shareDrift(w, assets)));
        if (chain.lending) drift.push(...(await lendingDrift(w, assets)));
      }
      return { chain_id: chain.chainId, checked_at: clock.now().toISOString(), wallets_checked: wallets.length, assets: assets.map((a) => a.symbol), drift_count: drift.length, drift, deficits };
    },
  };
}

/** The worker's periodic run: a warning naming every difference when the chain and the ledger disagree. */
export async function reconcileAndWarn(reconciler: Reconciler, log: Logger): Promise<ReconcileReport> {
  const report = await reconciler.run();
  if (report.deficits.length > 0) log.warn({ chain_id: report.chain_id, deficits: report.deficits }, 'wallets owe deficits after reversed deposits');
  if (report.drift_count > 0) log.warn({ chain_id: report.chain_id, drift: report.drift }, 'chain balances drift from the ledger');
  else log.debug({ chain_id: report.chain_id, wallets: report.wallets_checked }, 'chain reconciled: no drift');
  return report;
}

/** A position held in a contract (vault shares, Morpho borrow shares or collateral) against its ledger row; nothing is in flight. */
function positionDrift(w: { agent_id: string; wallet_id: string; address: string }, asset: string, onchain: bigint, ledger: bigint, decimals: number): Drift {
  return {
    agent_id: w.agent_id,
    wallet_id: w.wallet_id,
    address: w.address,
    asset,
    onchain: formatAmount(onchain, decimals),
    ledger: formatAmount(ledger, decimals),
    outgoing_unsettled: '0',
    expected_onchain: formatAmount(ledger, decimals),
    difference: signed(onchain - ledger, decimals),
    difference_units: (onchain - ledger).toString(),
  };
}
