// Every migration, in order. Listed statically so the same source serves Postgres and PGlite.
import type { Knex } from 'knex';
import * as foundation from './0001_foundation.js';
import * as ledger from './0002_ledger.js';
import * as webhooks from './0003_webhooks.js';
import * as oauth from './0004_oauth.js';
import * as defi from './0005_defi.js';
import * as chain from './0006_chain.js';
import * as chainDeposits from './0007_chain_deposits.js';
import * as owner from './0008_owner.js';
import * as defiChain from './0009_defi_chain.js';
import * as idempotencySealed from './0010_idempotency_sealed.js';
import * as oauthHashedIds from './0011_oauth_hashed_ids.js';
import * as custodyServer from './0012_custody_server.js';
import * as deliveryAttempts from './0015_delivery_attempts.js';
import * as policyReplay from './0016_policy_replay.js';
import * as approvals from './0017_approvals.js';
import * as chainReversals from './0018_chain_reversals.js';
import * as passkeySigner from './0019_passkey_signer.js';
import * as approvalNoticeRetry from './0020_approval_notice_retry.js';
import * as passkeyStepUp from './0021_passkey_step_up.js';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
  '0002_ledger': ledger,
  '0003_webhooks': webhooks,
  '0004_oauth': oauth,
  '0005_defi': defi,
  '0006_chain': chain,
  '0007_chain_deposits': chainDeposits,
  '0008_owner': owner,
  '0009_defi_chain': defiChain,
  '0010_idempotency_sealed': idempotencySealed,
  '0011_oauth_hashed_ids': oauthHashedIds,
  '0012_custody_server': custodyServer,
  '0015_delivery_attempts': deliveryAttempts,
  '0016_policy_replay': policyReplay,
  '0017_approvals': approvals,
  '0018_chain_reversals': chainReversals,
  '0019_passkey_signer': passkeySigner,
  '0020_approval_notice_retry': approvalNoticeRetry,
  '0021_passkey_step_up': passkeyStepUp,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name]!,
};
