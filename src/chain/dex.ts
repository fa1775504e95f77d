// Conversions on chain (issue 16): Uniswap v2 pairs deployed from the compiled artifacts that the npm package
// @uniswap/v2-core ships (no recompilation), our own tokens (contracts/DevWeth.sol, a WETH9 with deposit/withdraw, and contracts/DevToken.sol for EURC) beside the USDC
// token, and contracts/SwapRouter.sol, which swaps along a route in one transaction with the minimum output enforced
// on chain. The development bootstrap deploys and seeds them; `createDex` reads routes and reserves for quotes.
import { createRequire } from 'node:module';
import { viem } from '../lib/viem.js';
import type { Account, Chain as ViemChain, PublicClient, Transport, WalletClient } from 'viem';
import { devTokenAbi, devTokenBytecode } from '../../contracts/artifacts/DevToken.js';
import { devWethAbi, devWethBytecode } from '../../contracts/artifacts/DevWeth.js';
import { swapRouterAbi, swapRouterBytecode } from '../../contracts/artifacts/SwapRouter.js';
import type { Db } from '../db/knex.js';
import { findSetting } from '../db/repositories/chain.repository.js';
import { getAmountOut } from '../lib/defi/amm.js';
import type { Address } from './hex.js';
import { deployContract, mintToken, waitMined } from './token.js';

export { swapRouterAbi };

const require = createRequire(import.meta.url);
/** The ready-compiled Uniswap v2 contracts (solc 0.5.16, as Uniswap deployed them). */
const v2Artifact = (name: 'UniswapV2Factory' | 'UniswapV2Pair') => require(`@uniswap/v2-core/build/${name}.json`) as { bytecode: string };

// viem's parseAbi of these signatures, written out so that loading this module does not load viem:
// constructor(address feeToSetter)
// function getPair(address tokenA, address tokenB) view returns (address pair)
// function createPair(address tokenA, address tokenB) returns (address pair)
export const uniswapV2FactoryAbi = [
  { type: 'constructor', stateMutability: 'nonpayable', inputs: [{ type: 'address', name: 'feeToSetter' }] },
  {
    name: 'getPair',
    type: 'function',
    stateMutability: 'view',
    inputs: [
      { type: 'address', name: 'tokenA' },
      { type: 'address', name: 'tokenB' },
    ],
    outputs: [{ type: 'address', name: 'pair' }],
  },
  {
    name: 'createPair',
    type: 'function',
    stateMutability: 'nonpayable',
    inputs: [
      { type: 'address', name: 'tokenA' },
      { type: 'address', name: 'tokenB' },
    ],
    outputs: [{ type: 'address', name: 'pair' }],
  },
] as const;
// Likewise, the pair:
// function token0() view returns (address)
// function token1() view returns (address)
// function getReserves() view returns (uint112 reserve0, uint112 reserve1, uint32 blockTimestampLast)
// function mint(address to) returns (uint256 liquidity)
// function price0CumulativeLast() view returns (uint256)
// function price1CumulativeLast() view returns (uint256)
// event Swap(address indexed sender, uint256 amount0In, uint256 amount1In, uint256 amount0Out, uint256 amount1Out, address indexed to)
export const uniswapV2PairAbi = [
  { name: 'token0', type: 'function', stateMutability: 'view', inputs: [], outputs: [{ type: 'address' }] },
  { name: 'token1', type: 'function', stateMutability: 'view', inputs: [], outputs: [{ type: 'address' }] },
  {
    name: 'getReserves',
    type: 'function',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { type: 'uint112', name: 'reserve0' },
      { type: 'uint112', name: 'reserve1' },
      { type: 'uint32', name: 'blockTimestampLast' },
    ],
  },
  { name: 'mint', type: 'function', stateMutability: 'nonpayable', inputs: [{ type: 'address', name: 'to' }], outputs: [{ type: 'uint256', name: 'liquidity' }] },
  { name: 'price0CumulativeLast', type: 'function', stateMutability: 'view', inputs: [], outputs: [{ type: 'uint256' }] },
  { name: 'price1CumulativeLast', type: 'function', stateMutability: 'view', inputs: [], outputs: [{ type: 'uint256' }] },
  {
    name: 'Swap',
    type: 'event',
    inputs: [
      { type: 'address', name: 'sender', indexed: true },
      { type: 'uint256', name: 'amount0In' },
      { type: 'uint256', name: 'amount1In' },
      { type: 'uint256', name: 'amount0Out' },
      { type: 'uint256', name: 'amount1Out' },
      { type: 'address', name: 'to', indexed: true },
    ],
  },
] as const;

/** Uniswap v2's fee: 0.3 % (997/1000 in the pair's invariant check), 30 bps in src/lib/defi/amm.ts. */
export const UNISWAP_V2_FEE_BPS = 30n;
export const DEX_PROTOCOL = 'uniswap-v2';
/** The chain_settings key holding the deployed contracts (JSON). */
export const DEX_SETTING = 'dex';

export interface DexContracts {
  /** The only account the router lets act on a wallet's permit. */
  relayer: Address;
  factory: Address;
  router: Address;
  /** Token addresses by asset symbol (USDC, WETH, EURC). */
  tokens: Record<string, Address>;
  /** Pair addresses by "A/B" (sorted symbols). */
  pairs: Record<string, Address>;
}

export interface DexLeg {
  pair: Address;
  fromSymbol: string;
  toSymbol: string;
  tokenIn: Address;
  tokenOut: Address;
  reserveIn: bigint;
  reserveOut: bigint;
  amountIn: bigint;
  amountOut: bigint;
}

export interface DexQuote {
  router: Address;
  legs: DexLeg[];
  /** pairs[i] swaps path[i] -> path[i+1]. */
  pairs: Address[];
  path: Address[];
  amountOut: bigint;
  block: bigint;
}

/** A pool price of an asset in USDC, as the ledger records it (USD with 8 decimals, USDC taken at its own price). */
export interface PoolPrice {
  symbol: string;
  usdE8: bigint;
  /** `uniswap-v2:twap:<seconds>s` over the window since the previous observation, or `uniswap-v2:spot` on the first. */
  source: string;
}

const Q112 = 2n ** 112n;

export interface Dex {
  /** The deployed contracts on this chain, or null when none were deployed (no development bootstrap). */
  contracts(db: Db): Promise<DexContracts | null>;
  /**
   * An exact-input quote at the current reserves: the direct pair, else two hops through USDC. Null when either
   * asset has no token or no route exists (the conversion then stays on the simulated venue).
   */
  quote(db: Db, fromSymbol: string, toSymbol: string, amountIn: bigint): Promise<DexQuote | null>;
  /**
   * The price of every asset paired with USDC, time-weighted from the pair's cumulative price (Uniswap v2's
   * `price{0,1}CumulativeLast`, extended to the head block's timestamp) since the previous observation; that
   * observation rolls forward once it is `windowSeconds` old. The first observation gives the spot price.
   */
  observePrices(db: Db, usdcUsdE8: bigint, windowSeconds: number, decimals: Record<string, number>): Promise<PoolPrice[]>;
}

const pairKey = (a: string, b: string) => [a, b].sort().join('/');

export function createDex(deps: { client: PublicClient; chainId: number }): Dex {
  const { client, chainId } = deps;
  let cached: DexContracts | null = null;
  /** The previous observation per pair: its cumulative price of the non-USDC token (UQ112x112·s) and timestamp. */
  const observations = new Map<string, { cumulative: bigint; at: bigint }>();

  const dex: Dex = {
    async contracts(db) {
      if (cached) return cached;
      const raw = await findSetting(db, chainId, DEX_SETTING);
      if (!raw) return null;
      cached = JSON.parse(raw) as DexContracts;
      return cached;
    },

    async quote(db, fromSymbol, toSymbol, amountIn) {
      const c = await dex.contracts(db);
      if (!c || !c.tokens[fromSymbol] || !c.tokens[toSymbol] || fromSymbol === toSymbol) return null;
      let hops: [string, string][];
      if (c.pairs[pairKey(fromSymbol, toSymbol)]) hops = [[fromSymbol, toSymbol]];
      else if (fromSymbol !== 'USDC' && toSymbol !== 'USDC' && c.pairs[pairKey(fromSymbol, 'USDC')] && c.pairs[pairKey('USDC', toSymbol)])
        hops = [
          [fromSymbol, 'USDC'],
          ['USDC', toSymbol],
        ];
      else return null;
      const block = await client.getBlockNumber({ cacheTime: 0 });
      const legs: DexLeg[] = [];
      let amount = amountIn;
      for (const [a, b] of hops) {
        const pair = c.pairs[pairKey(a, b)]!;
        const [token0, [r0, r1]] = await Promise.all([
          client.readContract({ address: pair, abi: uniswapV2PairAbi, functionName: 'token0', blockNumber: block }),
          client.readContract({ address: pair, abi: uniswapV2PairAbi, functionName: 'getReserves', blockNumber: block }),
        ]);
        const tokenIn = c.tokens[a]!;
        const zeroForOne = viem().getAddress(token0) === viem().getAddress(tokenIn);
        const [reserveIn, reserveOut] = zeroForOne ? [r0, r1] : [r1, r0];
        const out = amount > 0n && reserveIn > 0n && reserveOut > 0n ? getAmountOut(amount, reserveIn, reserveOut, UNISWAP_V2_FEE_BPS) : 0n;
        legs.push({ pair, fromSymbol: a, toSymbol: b, tokenIn, tokenOut: c.tokens[b]!, reserveIn, reserveOut, amountIn: amount, amountOut: out });
        amount = out;
      }
      return { router: c.router, legs, pairs: legs.map((l) => l.pair), path: [legs[0]!.tokenIn, ...legs.map((l) => l.tokenOut)], amountOut: amount, block };
    },

    async observePrices(db, usdcUsdE8, windowSeconds, decimals) {
      const c = await dex.contracts(db);
      if (!c) return [];
      const head = await client.getBlock({ blockTag: 'latest' });
      const out: PoolPrice[] = [];
      for (const [key, pair] of Object.entries(c.pairs)) {
        const symbol = key.split('/').find((x) => x !== 'USDC');
        if (!symbol || !key.includes('USDC') || decimals[symbol] === undefined) continue;
        const read = <F extends 'token0' | 'getReserves' | 'price0CumulativeLast' | 'price1CumulativeLast'>(functionName: F) =>
          client.readContract({ address: pair, abi: uniswapV2PairAbi, functionName, blockNumber: head.number! } as never);
        const [token0, [r0, r1, last], cum0, cum1] = (await Promise.all([read('token0'), read('getReserves'), read('price0CumulativeLast'), read('price1CumulativeLast')])) as [
          Address,
          [bigint, bigint, number],
          bigint,
          bigint,
        ];
        const tokenIs0 = viem().getAddress(token0) === viem().getAddress(c.tokens[symbol]!);
        // price0 = reserve1/reserve0: USDC per token when the token is token0.
        const [rToken, rUsdc, cumulativeLast] = tokenIs0 ? [r0, r1, cum0] : [r1, r0, cum1];
        if (rToken === 0n) continue;
        const spot = (rUsdc * Q112) / rToken;
        const now = head.timestamp;
        const cumulative = cumulativeLast + spot * (now - BigInt(last));
        const prev = observations.get(pair);
        let priceQ112 = spot;
        let source = `${DEX_PROTOCOL}:spot`;
        if (prev && now > prev.at) {
          priceQ112 = (cumulative - prev.cumulative) / (now - prev.at);
          source = `${DEX_PROTOCOL}:twap:${now - prev.at}s`;
        }
        if (!prev || now - prev.at >= BigInt(windowSeconds)) observations.set(pair, { cumulative, at: now });
        // USDC base units per token base unit (·2^112) -> USD (8 decimals) per whole token.
        const usdE8 = (priceQ112 * 10n ** BigInt(decimals[symbol]!) * usdcUsdE8) / (Q112 * 10n ** 6n);
        out.push({ symbol, usdE8, source });
      }
      return out;
    },
  };
  return dex;
}

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/** The seeded liquidity of the development pools (at the seed prices: 1 WETH = 3000 USDC, 1 EURC = 1.08 USDC). */
export const DEV_POOLS: { a: string; b: string; amountA: string; amountB: string }[] = [
  { a: 'USDC', b: 'WETH', amountA: '3000000', amountB: '1000' },
  { a: 'USDC', b: 'EURC', amountA: '1080000', amountB: '1000000' },
];
export const DEV_TOKENS: { symbol: string; name: string; decimals: number }[] = [
  { symbol: 'WETH', name: 'Wrapped Ether', decimals: 18 },
  { symbol: 'EURC', name: 'Euro Coin', decimals: 6 },
];

/**
 * Development chain only: deploys the WETH-like and EURC-like tokens, the Uniswap v2 factory (from @uniswap/v2-core's
 * artifact), the router, and one pair per DEV_POOLS entry seeded with its liquidity (minted by the faucet, which owns
 * the tokens and keeps the LP shares).
 */
export async function deployDevDex(wallet: Wallet, client: PublicClient, usdc: Address, relayer: Address): Promise<DexContracts> {
  const decimals: Record<string, number> = { USDC: 6 };
  const tokens: Record<string, Address> = { USDC: usdc };
  for (const t of DEV_TOKENS) {
    // WETH is a WETH9 (deposit/withdraw, contracts/DevWeth.sol) so that accounts wrap and unwrap ETH on chain.
    tokens[t.symbol] =
      t.symbol === 'WETH'
        ? await deployContract(wallet, client, { abi: devWethAbi, bytecode: devWethBytecode, args: [], account: wallet.account, chain: wallet.chain })
        : await deployContract(wallet, client, { abi: devTokenAbi, bytecode: devTokenBytecode, args: [t.name, t.symbol, t.decimals], account: wallet.account, chain: wallet.chain });
    decimals[t.symbol] = t.decimals;
  }
  const factory = await deployContract(wallet, client, {
    abi: uniswapV2FactoryAbi,
    bytecode: `0x${v2Artifact('UniswapV2Factory').bytecode.replace(/^0x/, '')}`,
    args: [wallet.account.address],
    account: wallet.account,
    chain: wallet.chain,
  });
  const router = await deployContract(wallet, client, { abi: swapRouterAbi, bytecode: swapRouterBytecode, args: [relayer], account: wallet.account, chain: wallet.chain });
  const pairs: Record<string, Address> = {};
  for (const p of DEV_POOLS) {
    const [ta, tb] = [tokens[p.a]!, tokens[p.b]!];
    await waitMined(client, wallet.writeContract({ address: factory, abi: uniswapV2FactoryAbi, functionName: 'createPair', args: [ta, tb], account: wallet.account, chain: wallet.chain }));
    const pair = viem().getAddress(await client.readContract({ address: factory, abi: uniswapV2FactoryAbi, functionName: 'getPair', args: [ta, tb] }));
    if (pair === viem().zeroAddress) throw new Error(`pair ${p.a}/${p.b} was not created`);
    await mintToken(wallet, client, ta, pair, viem().parseUnits(p.amountA, decimals[p.a]!));
    await mintToken(wallet, client, tb, pair, viem().parseUnits(p.amountB, decimals[p.b]!));
    await waitMined(client, wallet.writeContract({ address: pair, abi: uniswapV2PairAbi, functionName: 'mint', args: [wallet.account.address], account: wallet.account, chain: wallet.chain }));
    pairs[pairKey(p.a, p.b)] = pair;
  }
  return { relayer, factory, router, tokens, pairs };
}
