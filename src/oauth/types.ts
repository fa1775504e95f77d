// What the OAuth wiring (provider.ts) and the connect page (connect.ts) share, so neither imports the other's module.
import type { Knex } from 'knex';
import type Provider from 'oidc-provider';
import type { Config } from '../config.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import type { Services } from '../services/registry.js';

export interface OAuthDeps {
  config: Readonly<Config>;
  db: Knex;
  clock: Clock;
  log: Logger;
  services: Services;
  /** The app's one MASTER_KEY sealer (signing keys, adapter payload secrets). */
  sealer: Sealer;
}

export interface OAuthRuntime {
  /** The provider built from the current signing keys (rebuilt after a rotation). */
  provider(): Promise<Provider>;
}
