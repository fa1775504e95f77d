// The ledger area's services, wired once: ledger, policy, operations (with the settlers of this area),
// payments, withdrawals, trusted destinations, account reads; plus the wallet-key hook and the demo setup.
import type { Chain } from '../../chain/port.js';
import type { Config } from '../../config.js';
import type { Db, Knex } from '../../db/knex.js';
import type { Address } from '../../chain/port.js';
import { setWalletKey } from '../../db/repositories/ledger.repository.js';
import { findVault } from '../../db/repositories/vault.repository.js';
import { DEX_PROTOCOL } from '../../chain/dex.js';
import { LENDING_SETTING, type LendingContracts } from '../../chain/lending.js';
import { findSetting } from '../../db/repositories/chain.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Sealer } from '../../lib/crypto.js';
import type { Logger } from '../../lib/logger.js';
import { generateWalletKey } from '../../lib/wallet-keys.js';
import { createAccountService, type AccountService, type ProtocolContracts } from '../defi/account.service.js';
import type { AgentCreatedHook } from '../agent.service.js';
import { createApprovalService, type ApprovalService } from './approvals.js';
import { createDestinationService, type DestinationService } from './destinations.js';
import { createLedgerService, type LedgerService } from './ledger.js';
import { createOperationService, type OperationService } from './operations.js';
import { createPaymentService, type PaymentService } from './payments.js';
import { createPolicyService, type PolicyService } from './policy.js';
import { createWithdrawalService, type WithdrawalService } from './withdrawals.js';
import { apiCodeOf, type CustodyService, type OwnerSignature } from '../custody/accounts.js';
import { claimChequeCallData, laneCall, policyHashOf } from '../../chain/accounts.js';
import type { Hex } from '../../chain/hex.js';
import { ApiError } from '../../lib/errors.js';
import { viem } from '../../lib/viem.js';
import { limitsFromChain, policyDrift, toOnchainPolicy } from '../custody/onchain-policy.js';

export interface LedgerArea {
  ledger: LedgerService;
  policy: PolicyService;
  operations: OperationService;
  payments: PaymentService;
  withdrawals: WithdrawalService;
  destinations: DestinationService;
  /** The owner's approvals of operations their policy holds (issue 27). */
  approvals: ApprovalService;
  account: AccountService;
  /** Gives a new wallet its secp256k1 key (sealed) and address; registered as an `onAgentCreated` hook. */
  assignWalletKey: AgentCreatedHook;
  /** Embedded demo: a permissive policy and funds, so the README's examples work. */
  setupDemoAgent(db: Db, agent: { agentId: string; walletId: string }, opts?: { fund?: boolean }): Promise<void>;
}

export function createLedgerArea(deps: {
  config: Readonly<Pick<Config, 'settlementDelayMs'> & Partial<Pick<Config, 'chain' | 'settlementBatchSize'>>>;
  sealer: Sealer;
  clock: Clock;
  log?: Logger;
  onAgentCreated?: AgentCreatedHook[];
  priceMaxAgeMs?: number;
  chain?: Chain;
  custody?: CustodyService | null;
}): LedgerArea {
  const { clock } = deps;
  const { sealer } = deps;
  const ledger = createLedgerService({ clock, priceMaxAgeMs: deps.priceMaxAgeMs });
  const policy = createPolicyService({ clock, log: deps.log });
  const operations = createOperationService({
    clock,
    ledger,
    policy,
    settlementDelayMs: deps.config.settlementDelayMs,
    settlementBatchSize: deps.config.settlementBatchSize,
    log: deps.log,
    chain: deps.chain,
    chainRetryMs: deps.config.chain?.pollMs,
  });
  const payments = createPaymentService({ clock, ledger, operations, policy });
  const withdrawals = createWithdrawalService({ clock, ledger, operations });
  const destinations = createDestinationService({ clock, operations });
  const approvals = createApprovalService({ clock, ledger, operations });
  const account = createAccountService({ clock, ledger, operations, protocolContracts: deps.chain && (deps.chain.dex || deps.chain.earn) ? (db) => protocolContractsOn(deps.chain!, db) : undefined });

  operations.registerSettler('payment', payments.settlePayment);
  operations.registerSettler('one_off_payment.create', payments.settleOneOffCreate);
  operations.registerSettler('withdrawal.bank', withdrawals.settle);
  operations.registerSettler('withdrawal.crypto', withdrawals.settle);
  operations.registerBatchSettler('payment', payments.batchSettlePayment);
  operations.registerBatchSettler('one_off_payment.create', payments.batchSettleOneOffCreate);
  operations.registerBatchSettler('withdrawal.bank', withdrawals.batchSettle);
  operations.registerBatchSettler('withdrawal.crypto', withdrawals.batchSettle);

  const custody = deps.custody ?? null;
  // evm mode with agent accounts (issue 24): the wallet is an AgentAccount, the policy is the account's.
  const assignWalletKey: AgentCreatedHook = custody
    ? custody.assignAccount
    : async (db, created) => {
        const key = generateWalletKey(sealer);
        await setWalletKey(db, created.walletId, key.address, key.sealedPrivateKey);
      };
  deps.onAgentCreated?.push(assignWalletKey);
  if (custody && deps.chain) {
    const chain = deps.chain;
    const protocols = async (db: Db) => {
      const out = new Map<string, Address[]>();
      for (const [id, contracts] of await protocolContractsOn(chain, db))
        out.set(
          id,
          contracts.filter((c) => c.role === 'router' || c.role === 'vault' || c.role === 'market').map((c) => c.address as Address),
        );
      return out;
    };
    policy.mirrorOnChain({
      async onSet(db, agentId, p, signature) {
        if (!(await custody.account(db, agentId))) return;
        const contracts = (await chain.custody!.contracts(db))!;
        await custody.apply(db as Knex, agentId, { kind: 'set_policy', policy: await toOnchainPolicy(db, { chain, contracts, protocols }, agentId, p) }, signature as OwnerSignature | undefined);
      },
      async onPayeeAdded(db, agentId, p, address, signature) {
        const acct = await custody.account(db, agentId);
        if (!acct) return;
        const contracts = (await chain.custody!.contracts(db))!;
        const next = await toOnchainPolicy(db, { chain, contracts, protocols }, agentId, p, address);
        const state = await custody.state(acct.address);
        // The account holds this policy already (the address is a payee by another recipient): no owner action.
        if (state.deployed && state.policyVersion > 0n && state.policyHash === policyHashOf(next)) return;
        await custody.apply(db as Knex, agentId, { kind: 'set_policy', policy: next }, signature as OwnerSignature | undefined);
      },
      async limits(db, agentId, mirror) {
        const acct = await custody.account(db, agentId);
        return acct ? limitsFromChain(await custody.state(acct.address), mirror, clock.now()) : undefined;
      },
      async drift(db, agentId) {
        const contracts = await chain.custody!.contracts(db);
        if (!contracts) return [];
        return policyDrift(db, { chain, contracts, protocols, custody, policy, now: clock.now() }, agentId);
      },
    });
    destinations.mirrorOnChain({
      async onAdd(db, agentId, address, unlockAt, signature) {
        if (!(await custody.account(db, agentId))) return;
        await custody.apply(
          db as Knex,
          agentId,
          { kind: 'add_trusted_destination', destination: address as Address, unlockAt: BigInt(Math.floor(unlockAt.getTime() / 1000)) },
          signature as OwnerSignature | undefined,
        );
      },
      async confirmRefusal(db, agentId, address) {
        const acct = await custody.account(db, agentId);
        if (!acct) return null;
        const refused = await chain.custody!.checkLane({ agentId, address: acct.address as Address, sealedLaneKey: acct.sealed_private_key }, laneCall.confirmTrustedDestination(address as Address));
        return refused ? { code: apiCodeOf(refused.code), message: refused.message } : null;
      },
    });
    payments.chequesOnChain({
      chequeIdFor: async (db, agentId, oneOffId) => ((await custody.account(db, agentId)) ? viem().keccak256(viem().stringToHex(`one-off:${oneOffId}`)) : null),
      async cancel(db, agentId, chequeId, signature) {
        await custody.apply(db as Knex, agentId, { kind: 'cancel_cheque', id: chequeId as Hex }, signature as OwnerSignature | undefined);
      },
      async claim(db, agentId, chequeId) {
        const acct = await custody.account(db, agentId);
        if (!acct) return;
        const sent = await chain.custody!.sendNow(db, viem().getAddress(acct.address) as Address, claimChequeCallData(chequeId as Hex), 'claim');
        if (!sent.ok) throw new ApiError(apiCodeOf(sent.code), sent.message, { chain_code: sent.code, tx_hash: sent.txHash });
      },
    });
    // A cheque issued in the account moves nothing: the one-off payment's hold stays until claim, cancel or expiry.
    operations.registerChainSettler('one_off_payment.create', async (_trx, _op, details) => ({ ok: true, details }));
  }

  return {
    ledger,
    policy,
    operations,
    payments,
    withdrawals,
    destinations,
    approvals,
    account,
    assignWalletKey,
    async setupDemoAgent(db, agent, opts = {}) {
      await policy.allowAll(db, agent.agentId);
      // On an evm chain the funds are put on chain instead and the deposit watcher credits them.
      if (opts.fund === false) return;
      await account.fund(db, agent.agentId, { asset: 'USDC', amount: '1000' });
      await account.fund(db, agent.agentId, { asset: 'ETH', amount: '1' });
    },
  };
}

/** `/protocols` contracts on a chain with the DeFi bootstrap: Uniswap v2's factory, router and pairs, each earn protocol's vaults. */
async function protocolContractsOn(chain: Chain, db: Db): ReturnType<ProtocolContracts> {
  const out: Awaited<ReturnType<ProtocolContracts>> = new Map();
  const dex = await chain.dex?.contracts(db);
  if (dex) {
    out.set(DEX_PROTOCOL, [
      { role: 'factory', address: dex.factory },
      { role: 'router', address: dex.router },
      ...Object.entries(dex.pairs).map(([name, address]) => ({ role: 'pool' as const, name, address })),
    ]);
  }
  const earn = await chain.earn?.contracts(db);
  for (const [vaultId, address] of Object.entries(earn?.vaults ?? {})) {
    const v = await findVault(db, vaultId);
    if (!v) continue;
    const list = out.get(v.protocol_id) ?? [{ role: 'router' as const, address: earn!.router }];
    list.push({ role: 'vault', name: v.name, address });
    // The distributor pays the rewards of the protocol's on-chain vaults that have some in its asset.
    const distributor = earn!.rewards;
    if (distributor && v.reward_asset_symbol === distributor.asset && !list.some((c) => c.role === 'rewards_distributor')) list.push({ role: 'rewards_distributor', address: distributor.distributor });
    out.set(v.protocol_id, list);
  }
  const lending = await findSetting(db, chain.chainId, LENDING_SETTING);
  if (lending) {
    const { morpho, market } = JSON.parse(lending) as LendingContracts;
    out.set('morpho', [...(out.get('morpho') ?? []), { role: 'market', name: market.name, address: morpho }]);
  }
  return out;
}
