// agentctl: earn vaults and borrow markets added by the owner (`vault add`, `vault list`, `market add`).
import { CliUsageError, optionalFlag, parseIntFlag, requireFlag, type CliArgs, type CliCommand } from './types.js';

function boolFlag(args: CliArgs, name: string): boolean | undefined {
  const value = args.flags[name];
  if (value === undefined) return undefined;
  if (value === true || value === 'true') return true;
  if (value === 'false') return false;
  throw new CliUsageError(`--${name} takes true or false`);
}

export const defiCommands: CliCommand[] = [
  {
    name: 'vault add',
    usage: 'vault add --name N --protocol P --asset A --apy-bps N [--capacity AMOUNT] [--address 0x..] [--decimals-offset N] [--reward-asset A --reward-bps N]',
    run: async (ctx, args) => {
      const vault = await ctx.services.defi.earn.addVault(ctx.db, {
        name: requireFlag(args, 'name'),
        protocol: requireFlag(args, 'protocol'),
        asset: requireFlag(args, 'asset'),
        apyBps: parseIntFlag(args, 'apy-bps', true),
        capacity: optionalFlag(args, 'capacity') ?? null,
        address: optionalFlag(args, 'address'),
        decimalsOffset: parseIntFlag(args, 'decimals-offset'),
        rewardAsset: optionalFlag(args, 'reward-asset') ?? null,
        rewardBps: parseIntFlag(args, 'reward-bps'),
      });
      return { ...vault };
    },
    http: (args) => ({
      method: 'POST',
      path: '/v1/admin/vaults',
      body: {
        name: requireFlag(args, 'name'),
        protocol: requireFlag(args, 'protocol'),
        asset: requireFlag(args, 'asset'),
        apy_bps: parseIntFlag(args, 'apy-bps', true),
        capacity: optionalFlag(args, 'capacity') ?? null,
        address: optionalFlag(args, 'address'),
        decimals_offset: parseIntFlag(args, 'decimals-offset'),
        reward_asset: optionalFlag(args, 'reward-asset') ?? null,
        reward_bps: parseIntFlag(args, 'reward-bps'),
      },
    }),
  },
  {
    name: 'vault list',
    usage: 'vault list',
    run: async (ctx) => ({ vaults: await ctx.services.defi.earn.listVaults(ctx.db) }),
    http: () => ({ method: 'GET', path: '/v1/admin/vaults' }),
  },
  {
    name: 'market add',
    usage: 'market add --asset A --ltv-bps N --liquidation-threshold-bps N --borrow-apr-bps N [--protocol P] [--collateral true|false] [--borrowable true|false]',
    run: (ctx, args) =>
      ctx.services.defi.borrow.addMarket(ctx.db, {
        asset: requireFlag(args, 'asset'),
        protocol: optionalFlag(args, 'protocol'),
        ltvBps: parseIntFlag(args, 'ltv-bps', true),
        liquidationThresholdBps: parseIntFlag(args, 'liquidation-threshold-bps', true),
        borrowAprBps: parseIntFlag(args, 'borrow-apr-bps', true),
        collateralEnabled: boolFlag(args, 'collateral'),
        borrowEnabled: boolFlag(args, 'borrowable'),
      }),
    http: (args) => ({
      method: 'POST',
      path: '/v1/admin/markets',
      body: {
        asset: requireFlag(args, 'asset'),
        protocol: optionalFlag(args, 'protocol'),
        ltv_bps: parseIntFlag(args, 'ltv-bps', true),
        liquidation_threshold_bps: parseIntFlag(args, 'liquidation-threshold-bps', true),
        borrow_apr_bps: parseIntFlag(args, 'borrow-apr-bps', true),
        collateral: boolFlag(args, 'collateral'),
        borrowable: boolFlag(args, 'borrowable'),
      },
    }),
  },
];
