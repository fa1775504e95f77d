// Borrow on chain, first step (issue 16): Morpho Blue compiled from the npm package @morpho-org/morpho-blue with solc
// 0.8.19 (`make contracts`), deployed by the development bootstrap with the package's oracle and IRM mocks and one
// market, WETH collateral / USDC loan at an 86 % LLTV, supplied with USDC liquidity. The borrow routes still settle
// in the ledger; this module gives the market to the reads (/protocols) and to the next step.
import { encodeAbiParameters, keccak256, maxUint256, parseUnits, type Account, type Chain as ViemChain, type PublicClient, type Transport, type WalletClient } from 'viem';
import { irmMockAbi, irmMockBytecode } from '../../contracts/artifacts/IrmMock.js';
import { morphoAbi, morphoBytecode } from '../../contracts/artifacts/Morpho.js';
import { oracleMockAbi, oracleMockBytecode } from '../../contracts/artifacts/OracleMock.js';
import type { Address, Hex } from './port.js';
import { deployContract, mintToken, usdCoinAbi, waitMined } from './token.js';

export { morphoAbi };

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
  oracle: Address;
  irm: Address;
  /** The WETH/USDC market: its id (keccak of the params) and params. */
  market: { id: Hex; name: string; params: MarketParams };
}

const paramsTuple = (p: MarketParams) => ({ loanToken: p.loanToken, collateralToken: p.collateralToken, oracle: p.oracle, irm: p.irm, lltv: BigInt(p.lltv) });

/** Morpho's market id: keccak256 of the ABI-encoded params (MarketParamsLib.id). */
export const marketId = (p: MarketParams): Hex =>
  keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'address' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }], [p.loanToken, p.collateralToken, p.oracle, p.irm, BigInt(p.lltv)]));

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/**
 * Development chain only: Morpho Blue owned by the faucet, the oracle mock at the seeded 3000 USDC per WETH, the
 * IRM mock, the WETH/USDC market, and 1,000,000 USDC of liquidity supplied by the faucet.
 */
export async function deployDevLending(wallet: Wallet, client: PublicClient, tokens: Record<string, Address>): Promise<LendingContracts> {
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
  const liquidity = parseUnits('1000000', 6);
  await mintToken(wallet, client, tokens.USDC!, wallet.account.address, liquidity);
  await waitMined(client, wallet.writeContract({ address: tokens.USDC!, abi: usdCoinAbi, functionName: 'approve', args: [morpho, maxUint256], ...opts }));
  await waitMined(client, wallet.writeContract({ address: morpho, abi: morphoAbi, functionName: 'supply', args: [paramsTuple(params), liquidity, 0n, wallet.account.address, '0x'], ...opts }));
  return { morpho, oracle, irm, market: { id: marketId(params), name: 'WETH/USDC', params } };
}
