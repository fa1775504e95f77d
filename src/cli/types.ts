// agentctl commands: `<group> <name>` with positional arguments and --flags; each returns one JSON object.
import type { Knex } from 'knex';
import type { Config } from '../config.js';
import type { Services } from '../services/registry.js';
import type { Clock } from '../lib/clock.js';
import type { HttpCall } from './client.js';
import type { OwnerSignature } from '../services/custody/accounts.js';

export interface CliContext {
  db: Knex;
  services: Services;
  config: Readonly<Config>;
  clock: Clock;
  /** The owner's signature of the change the command proposes (agentctl --owner-key-file signed it here). */
  ownerSignature?: OwnerSignature;
}

export interface CliArgs {
  positional: string[];
  flags: Record<string, string | boolean>;
}

export interface CliCommand {
  /** e.g. "agent create" */
  name: string;
  usage: string;
  /** Without a reachable server: the services on the database directly. */
  run(ctx: CliContext, args: CliArgs): Promise<Record<string, unknown>>;
  /**
   * With a reachable server: the owner or admin API call doing the same (same output). Absent for the
   * chain's operator commands (bootstrap, faucet, reconcile), which act on the chain and always run here.
   */
  http?(args: CliArgs, config: Readonly<Config>): HttpCall | Promise<HttpCall>;
}

/** A path segment from user input (ids are validated by the server; this keeps `/` and `?` out). */
export const seg = (value: string): string => encodeURIComponent(value);

export class CliUsageError extends Error {}

/** The modules a command needs on the database (src/cli/local.ts), loaded on first use. */
export const onDatabase = () => import('./local.js');

export function requireFlag(args: CliArgs, name: string): string {
  const value = args.flags[name];
  if (typeof value !== 'string' || value === '') throw new CliUsageError(`--${name} is required`);
  return value;
}

export function optionalFlag(args: CliArgs, name: string): string | undefined {
  const value = args.flags[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

export function requirePositional(args: CliArgs, index: number, what: string): string {
  const value = args.positional[index];
  if (!value) throw new CliUsageError(`${what} is required`);
  return value;
}

export function parseDateFlag(args: CliArgs, name: string): Date | undefined {
  const raw = optionalFlag(args, name);
  if (raw === undefined) return undefined;
  const date = new Date(raw);
  if (Number.isNaN(date.getTime())) throw new CliUsageError(`--${name} must be an ISO 8601 timestamp`);
  return date;
}

export function parseIntFlag(args: CliArgs, name: string, required: true): number;
export function parseIntFlag(args: CliArgs, name: string, required?: false): number | undefined;
export function parseIntFlag(args: CliArgs, name: string, required = false): number | undefined {
  const raw = required ? requireFlag(args, name) : optionalFlag(args, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new CliUsageError(`--${name} must be a non-negative integer`);
  return value;
}
