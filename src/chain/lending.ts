// Borrow on chain (issue 16): Morpho Blue compiled from the npm package @morpho-org/morpho-blue with solc 0.8.19
// (`make contracts`), deployed by the development bootstrap with the package's oracle and IRM mocks and one market,
// WETH collateral / USDC loan at an 86 % LLTV, supplied with USDC liquidity, and contracts/BorrowRouter.sol through
// which the relayer supplies and withdraws collateral, borrows and repays on a wallet's signatures.
// `createLendingVenue` reads a wallet's position and values it exactly as Morpho's `_isHealthy` does.
import { borrowRouterAbi, borrowRouterBytecode } from '../../contracts/artifacts/BorrowRouter.js';
import type { Db } from '../db/knex.js';
import { findSetting } from '../db/repositories/chain.repository.js';
import { viem } from '../lib/viem.js';
import type { Account, Chain as ViemChain, PublicClient, Transport, WalletClient } from 'viem';
import { irmMockAbi, irmMockBytecode } from '../../contracts/artifacts/IrmMock.js';
import { morphoAbi, morphoBytecode } from '../../contracts/artifacts/Morpho.js';
import { oracleMockAbi, oracleMockBytecode } from '../../contracts/artifacts/OracleMock.js';
import type { Address, Hex } from './hex.js';
import { deployContract, mintToken, usdCoinAbi, waitMined } from './token.js';

export { borrowRouterAbi, morphoAbi, oracleMockAbi };

/**
 * Morpho's events (EventsLib): solc 0.8.19 leaves events emitted from a library out of the contract's ABI, so they
 * are declared here, as in the package's src/libraries/EventsLib.sol.
 */
// viem's parseAbi of these signatures, written out so that loading this module does not load viem:
// event SupplyCollateral(bytes32 indexed id, address indexed caller, address indexed onBehalf, uint256 assets)
// event WithdrawCollateral(bytes32 indexed id, address caller, address indexed onBehalf, address indexed receiver, uint256 assets)
// event Borrow(bytes32 indexed id, address caller, address indexed onBehalf, address indexed receiver, uint256 assets, uint256 shares)
// event Repay(bytes32 indexed id, address indexed caller, address indexed onBehalf, uint256 assets, uint256 shares)
export const morphoEventsAbi = [
  {
    name: 'SupplyCollateral',
    type: 'event',
    inputs: [
      { type: 'bytes32', name: 'id', indexed: true },
      { type: 'address', name: 'caller', indexed: true },
      { type: 'address', name: 'onBehalf', indexed: true },
      { type: 'uint256', name: 'assets' },
    ],
  },
  {
    name: 'WithdrawCollateral',
    type: 'event',
    inputs: [
      { type: 'bytes32', name: 'id', indexed: true },
      { type: 'address', name: 'caller' },
      { type: 'address', name: 'onBehalf', indexed: true },
      { type: 'address', name: 'receiver', indexed: true },
      { type: 'uint256', name: 'assets' },
    ],
  },
  {
    name: 'Borrow',
    type: 'event',
    inputs: [
      { type: 'bytes32', name: 'id', indexed: true },
      { type: 'address', name: 'caller' },
      { type: 'address', name: 'onBehalf', indexed: true },
      { type: 'address', name: 'receiver', indexed: true },
      { type: 'uint256', name: 'assets' },
      { type: 'uint256', name: 'shares' },
    ],
  },
  {
    name: 'Repay',
    type: 'event',
    inputs: [
      { type: 'bytes32', name: 'id', indexed: true },
      { type: 'address', name: 'caller', indexed: true },
      { type: 'address', name: 'onBehalf', indexed: true },
      { type: 'uint256', name: 'assets' },
      { type: 'uint256', name: 'shares' },
    ],
  },
] as const;

/** The chain_settings key holding the deployed lending contracts (JSON). */
export const LENDING_SETTING = 'lending';
/** The development market's liquidation LTV (WAD). */
export const DEV_LLTV = 860_000_000_000_000_000n;
/** Morpho's oracle scale: the price of one collateral base unit in loan base units, times 1e36. */
export const ORACLE_PRICE_SCALE = 10n ** 36n;

export interface MarketParams {
  loanToken: Address;
  collateralToken: Address;
  oracle: Address;
  irm: Address;
  lltv: string;
}

export interface LendingContracts {
  morpho: Address;
  /** contracts/BorrowRouter.sol, bound to `relayer` (absent in settings written before the router existed). */
  router?: Address;
  relayer?: Address;
  oracle: Address;
  irm: Address;
  /** The WETH/USDC market: its id (keccak of the params) and params. */
  market: { id: Hex; name: string; params: MarketParams };
}

const paramsTuple = (p: MarketParams) => ({ loanToken: p.loanToken, collateralToken: p.collateralToken, oracle: p.oracle, irm: p.irm, lltv: BigInt(p.lltv) });

/** Morpho's market id: keccak256 of the ABI-encoded params (MarketParamsLib.id). */
export const marketTuple = paramsTuple;

export const marketId = (p: MarketParams): Hex =>
  viem().keccak256(
    viem().encodeAbiParameters(
      [{ type: 'address' }, { type: 'address' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }],
      [p.loanToken, p.collateralToken, p.oracle, p.irm, BigInt(p.lltv)],
    ),
  );

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/**
 * Development chain only: Morpho Blue owned by the faucet, the oracle mock at the seeded 3000 USDC per WETH, the
 * IRM mock, the WETH/USDC market, and 1,000,000 USDC of liquidity supplied by the faucet.
 */
export async function deployDevLending(wallet: Wallet, client: PublicClient, tokens: Record<string, Address>, relayer: Address): Promise<LendingContracts> {
  const opts = { account: wallet.account, chain: wallet.chain };
  const morpho = await deployContract(wallet, client, { abi: morphoAbi, bytecode: morphoBytecode, args: [wallet.account.address], ...opts });
  const oracle = await deployContract(wallet, client, { abi: oracleMockAbi, bytecode: oracleMockBytecode, ...opts });
  const irm = await deployContract(wallet, client, { abi: irmMockAbi, bytecode: irmMockBytecode, ...opts });
  // 3000 USDC (6 decimals) per WETH (18 decimals), scaled by 1e36.
  await waitMined(client, wallet.writeContract({ address: oracle, abi: oracleMockAbi, functionName: 'setPrice', args: [(3000n * 10n ** 6n * ORACLE_PRICE_SCALE) / 10n ** 18n], ...opts }));
  await waitMined(client, wallet.writeContract({ address: morpho, abi: morphoAbi, functionName: 'enableIrm', args: [irm], ...opts }));
  await waitMined(client, wallet.writeContract({ address: morpho, abi: morphoAbi, functionName: 'enableLltv', args: [DEV_LLTV], ...opts }));
  const params: MarketParams = { loanToken: tokens.USDC!, collateralToken: tokens.WETH!, oracle, irm, lltv: DEV_LLTV.toString() };
  await waitMined(client, wallet.writeContract({ address: morpho, abi: morphoAbi, functionName: 'createMarket', args: [paramsTuple(params)], ...opts }));
  const liquidity = viem().parseUnits('1000000', 6);
  await mintToken(wallet, client, tokens.USDC!, wallet.account.address, liquidity);
  await waitMined(client, wallet.writeContract({ address: tokens.USDC!, abi: usdCoinAbi, functionName: 'approve', args: [morpho, viem().maxUint256], ...opts }));
  await waitMined(client, wallet.writeContract({ address: morpho, abi: morphoAbi, functionName: 'supply', args: [paramsTuple(params), liquidity, 0n, wallet.account.address, '0x'], ...opts }));
  const router = await deployContract(wallet, client, { abi: borrowRouterAbi, bytecode: borrowRouterBytecode, args: [relayer, morpho], ...opts });
  return { morpho, router, relayer, oracle, irm, market: { id: marketId(params), name: 'WETH/USDC', params } };
}

const WAD = 10n ** 18n;
/** Morpho's SharesMathLib virtual shares and assets. */
const VIRTUAL_SHARES = 10n ** 6n;
const VIRTUAL_ASSETS = 1n;
const mulDivDown = (x: bigint, y: bigint, d: bigint) => (x * y) / d;
const mulDivUp = (x: bigint, y: bigint, d: bigint) => (x * y + (d - 1n)) / d;
/** SharesMathLib.toAssetsUp. */
export const toAssetsUp = (shares: bigint, totalAssets: bigint, totalShares: bigint) => mulDivUp(shares, totalAssets + VIRTUAL_ASSETS, totalShares + VIRTUAL_SHARES);
/** SharesMathLib.toSharesUp. */
export const toSharesUp = (assets: bigint, totalAssets: bigint, totalShares: bigint) => mulDivUp(assets, totalShares + VIRTUAL_SHARES, totalAssets + VIRTUAL_ASSETS);

/** A wallet's position in the market, as Morpho stores and values it (no interest accrued since the market's lastUpdate). */
export interface LendingPosition {
  collateral: bigint;
  borrowShares: bigint;
  /** toAssetsUp(borrowShares, totalBorrowAssets, totalBorrowShares): the debt as `_isHealthy` counts it. */
  borrowed: bigint;
  /** The oracle's price (loan units per collateral unit, times 1e36). */
  price: bigint;
  lltv: bigint;
  totalBorrowAssets: bigint;
  totalBorrowShares: bigint;
}

/** Morpho's `_isHealthy` arithmetic: maxBorrow = collateral.mulDivDown(price, 1e36).wMulDown(lltv); healthy iff maxBorrow >= borrowed. */
export function maxBorrowOf(collateral: bigint, price: bigint, lltv: bigint): bigint {
  return mulDivDown(mulDivDown(collateral, price, ORACLE_PRICE_SCALE), lltv, WAD);
}

/** The position's figures in WAD: LTV = borrowed / collateral value (both in loan units), health = maxBorrow / borrowed. */
export function accountData(p: Pick<LendingPosition, 'collateral' | 'borrowed' | 'price' | 'lltv'>): { collateralValue: bigint; maxBorrow: bigint; ltvWad: bigint; healthFactorWad: bigint | null } {
  const collateralValue = mulDivDown(p.collateral, p.price, ORACLE_PRICE_SCALE);
  const maxBorrow = maxBorrowOf(p.collateral, p.price, p.lltv);
  const ltvWad = p.borrowed === 0n ? 0n : collateralValue === 0n ? 2n ** 255n : mulDivUp(p.borrowed, WAD, collateralValue);
  const healthFactorWad = p.borrowed === 0n ? null : mulDivDown(maxBorrow, WAD, p.borrowed);
  return { collateralValue, maxBorrow, ltvWad, healthFactorWad };
}

export interface LendingVenue {
  contracts(db: Db): Promise<(LendingContracts & { router: Address }) | null>;
  position(c: LendingContracts, owner: Address): Promise<LendingPosition>;
}

export function createLendingVenue(deps: { client: PublicClient; chainId: number }): LendingVenue {
  const { client, chainId } = deps;
  return {
    async contracts(db) {
      const raw = await findSetting(db, chainId, LENDING_SETTING);
      if (!raw) return null;
      const c = JSON.parse(raw) as LendingContracts;
      return c.router ? (c as LendingContracts & { router: Address }) : null;
    },
    async position(c, owner) {
      const [[, borrowShares, collateral], market, price] = await Promise.all([
        client.readContract({ address: c.morpho, abi: morphoAbi, functionName: 'position', args: [c.market.id, owner] }),
        client.readContract({ address: c.morpho, abi: morphoAbi, functionName: 'market', args: [c.market.id] }),
        client.readContract({ address: c.oracle, abi: oracleMockAbi, functionName: 'price' }),
      ]);
      const [, , totalBorrowAssets, totalBorrowShares] = market;
      return { collateral, borrowShares, borrowed: toAssetsUp(borrowShares, totalBorrowAssets, totalBorrowShares), price, lltv: BigInt(c.market.params.lltv), totalBorrowAssets, totalBorrowShares };
    },
  };
}
