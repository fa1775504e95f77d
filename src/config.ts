// The only reader of process.env: validated once at boot, typed, frozen. Lists every problem.

export interface Config {
  nodeEnv: 'production' | 'development' | 'test';
  port: number;
  host: string;
  baseUrl: string;
  databaseUrl: string | null;
  /** Connections per process; size Postgres' max_connections for every API replica and worker (docs/OPERATIONS.md). */
  databasePoolMax: number;
  dataDir: string;
  redisUrl: string | null;
  redisPrefix: string;
  /** Bound on one rate-limit call to Redis; past it Redis counts as down (reads degrade, writes 503). */
  redisCommandTimeoutMs: number;
  logLevel: string;
  masterKey: string;
  /** The key being rotated away from: still opens sealed values until `npm run rotate-master-key` has re-sealed them. */
  masterKeyPrevious: string | null;
  autoMigrate: boolean;
  runWorker: boolean;
  settlementDelayMs: number;
  /** Operations settled per transaction on the simulated chain (issue 31); 0 settles them one at a time. */
  settlementBatchSize: number;
  webhookLeaseMs: number;
  webhookAttemptTimeoutMs: number;
  unsafeAllowLoopbackTargets: boolean;
  smtpUrl: string | null;
  /**
   * Passkeys (issue 27): the WebAuthn relying party id (WEBAUTHN_RP_ID, default BASE_URL's host name). Assertions are
   * accepted from BASE_URL's origin and from the same scheme and port under the RP id's name (a console reached as
   * http://localhost:<port> while BASE_URL names 127.0.0.1: browsers refuse IP addresses as RP ids).
   */
  webauthnRpId: string;
  trustProxy: boolean;
  validateResponses: boolean;
  /** Compile every operation's validators in the background after listening (off: each compiles on first use). */
  warmValidators: boolean;
  shutdownGraceMs: number;
  /** After SIGTERM, /readyz answers 503 this long while requests are still served, so load balancers stop routing first. */
  drainDelayMs: number;
  /** Port of the Prometheus `/metrics` listener; null = no metrics (and no metrics cost). */
  metricsPort: number | null;
  metricsHost: string;
  /** OTLP/HTTP traces endpoint (base URL; `/v1/traces` is appended); null = tracing off. */
  otlpEndpoint: string | null;
  serviceName: string;
  /** Postgres bounds, so an outage or a partition answers 503 quickly instead of hanging (see README). */
  db: DbTimeouts;
  /** The operator's token for /v1/admin (and any owner on /v1/owner); see src/auth/admin-token.ts. */
  adminToken: string | null;
  /** Where agentctl looks for the running server (AGENT_API_BASE_URL, default the printed listening address). */
  agentApiBaseUrl: string;
  /**
   * The authorization server's JWKS (`<issuer>/oauth/jwks`) when this process runs apart from it (OAUTH_JWKS_URI);
   * null = this process is the authorization server and reads the same key set without a network hop.
   */
  oauthJwksUri: string | null;
  chain: ChainConfig;
  mcp: McpConfig;
}

/** MCP sessions (src/mcp/sessions.ts): shared through Redis when REDIS_URL is set (any API process serves any session), else in memory. */
export interface McpConfig {
  /** Live sessions one OAuth grant may hold; the next initialize answers 429. */
  maxSessionsPerGrant: number;
  /** A session with no request and no open stream for this long is closed. */
  sessionIdleMs: number;
  /** How often subscribed sessions read new events from the events table. */
  eventPollMs: number;
}

export interface DbTimeouts {
  /** Opening one connection (TCP + startup). */
  connectTimeoutMs: number;
  /** Waiting for a pooled connection (knex acquireConnectionTimeout). */
  acquireTimeoutMs: number;
  /** Server-side statement_timeout; 0 = none. */
  statementTimeoutMs: number;
  /** Client-side wait for a query's answer (a silent network); the connection is discarded after it. 0 = none. */
  queryTimeoutMs: number;
}

/** Chain-backed settlement (issue 11). `rpcUrl` null = the simulated chain. */
export interface ChainConfig {
  rpcUrl: string | null;
  /** Expected chain id; null = read from the node at start. */
  chainId: number | null;
  confirmations: number;
  submitTimeoutMs: number;
  /** A broadcast transaction not mined after this long is re-signed with bumped fees. */
  rebroadcastMs: number;
  pollMs: number;
  /** Hex private key of the relayer that submits EIP-3009 transfers and pays their gas; null = generated (dev chain). */
  relayerKey: string | null;
  /** Token addresses on a real chain, by asset symbol (CHAIN_ASSET_ADDRESSES=USDC=0x...,EURC=0x...). */
  assetAddresses: Record<string, string>;
  /** Deploy the token and fund the relayer on chain id 31337 when no USDC address is configured. */
  devBootstrap: boolean;
  /** Wei held beside an ETH transfer for its gas; the transaction's max fee is capped to fit. */
  ethGasReserveWei: bigint;
  /** Seconds an EIP-3009 authorization stays valid. */
  authorizationTtlSeconds: number;
  /** Milliseconds between the worker's reconciliations of on-chain balances with the ledger (0 = off). */
  reconcileIntervalMs: number;
  /** Milliseconds between pool price observations on a chain with the DeFi bootstrap (0 = off: the feed's prices stay). */
  poolPriceIntervalMs: number;
  /** The first block the deposit watcher scans when it has no cursor yet; null = block 0 on chain 31337, else the newest confirmed block then. */
  depositStartBlock: number | null;
}

export class ConfigError extends Error {
  /** NODE_ENV=production was asked for: the entry point reports in JSON. */
  constructor(
    readonly problems: string[],
    readonly production = false,
  ) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

const DEV_MASTER_KEY = 'dev-only-master-key-change-me-0000000000';

type Env = Record<string, string | undefined>;

/** Reads configuration from an environment map; empty strings count as unset (contract §15). */
export function loadConfig(env: Env = process.env, warn: (msg: string) => void = (m) => process.stderr.write(`${m}\n`)): Readonly<Config> {
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const int = (name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be an integer in [${min}, ${max}], got "${raw}"`);
      return fallback;
    }
    return value;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    problems.push(`${name} must be a boolean (true/false/1/0), got "${raw}"`);
    return fallback;
  };
  const url = (name: string, protocols: string[]): string | null => {
    const raw = get(name);
    if (raw === undefined) return null;
    try {
      const parsed = new URL(raw);
      if (!protocols.includes(parsed.protocol)) problems.push(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
      return raw;
    } catch {
      problems.push(`${name} is not a valid URL`);
      return null;
    }
  };

  const nodeEnvRaw = get('NODE_ENV') ?? 'development';
  if (!['production', 'development', 'test'].includes(nodeEnvRaw)) problems.push(`NODE_ENV must be production, development or test, got "${nodeEnvRaw}"`);
  const nodeEnv = (['production', 'development', 'test'].includes(nodeEnvRaw) ? nodeEnvRaw : 'development') as Config['nodeEnv'];
  const production = nodeEnv === 'production';

  const port = int('PORT', 3000, 0, 65535);
  const host = get('HOST') ?? '127.0.0.1';
  const baseUrlRaw = url('BASE_URL', ['http:', 'https:']);
  // The default issuer is the address the server prints, so discovery through it passes issuer checks.
  const baseUrl = (baseUrlRaw ?? listenUrl(host, port)).replace(/\/+$/, '');
  if (baseUrlRaw && new URL(baseUrlRaw).pathname !== '/') problems.push('BASE_URL must be an origin with no path (it is the OAuth issuer)');
  if (production && !baseUrlRaw) problems.push('BASE_URL is required in production');

  const databaseUrl = url('DATABASE_URL', ['postgres:', 'postgresql:']);
  const redisUrl = url('REDIS_URL', ['redis:', 'rediss:']);
  if (production && !databaseUrl) problems.push('DATABASE_URL is required in production (the embedded PGlite default is for development)');
  if (production && !redisUrl) problems.push('REDIS_URL is required in production (the in-process limiter is for development)');

  let masterKey = get('MASTER_KEY');
  if (!masterKey) {
    if (production) problems.push('MASTER_KEY is required in production (it encrypts wallet keys and webhook secrets)');
    else warn('warning: MASTER_KEY is not set; using the insecure development default');
    masterKey = DEV_MASTER_KEY;
  } else if (masterKey.length < 32) {
    problems.push('MASTER_KEY must be at least 32 characters');
  }

  const masterKeyPrevious = get('MASTER_KEY_PREVIOUS') ?? null;
  if (masterKeyPrevious !== null && masterKeyPrevious.length < 32) problems.push('MASTER_KEY_PREVIOUS must be at least 32 characters');
  if (masterKeyPrevious !== null && masterKeyPrevious === masterKey) problems.push('MASTER_KEY_PREVIOUS must differ from MASTER_KEY');

  const unsafeAllowLoopbackTargets = bool('UNSAFE_ALLOW_LOOPBACK_TARGETS', false);
  if (unsafeAllowLoopbackTargets && production) problems.push('UNSAFE_ALLOW_LOOPBACK_TARGETS is refused when NODE_ENV=production');
  else if (unsafeAllowLoopbackTargets) warn('warning: UNSAFE_ALLOW_LOOPBACK_TARGETS is on: webhook and x402 targets may be loopback IP literals');

  const logLevel = get('LOG_LEVEL') ?? (nodeEnv === 'test' ? 'silent' : 'info');
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) problems.push(`LOG_LEVEL must be a pino level, got "${logLevel}"`);

  const smtpUrl = url('SMTP_URL', ['smtp:', 'smtps:']);
  // A relying party id is a host name: browsers refuse an IP literal, so an IPv6 BASE_URL defaults to localhost.
  const baseHost = new URL(baseUrl).hostname;
  const webauthnRpId = get('WEBAUTHN_RP_ID') ?? (/^[a-z0-9.-]+$/i.test(baseHost) ? baseHost : 'localhost');
  if (!/^[a-z0-9.-]+$/i.test(webauthnRpId)) problems.push('WEBAUTHN_RP_ID must be a host name');
  // Without SMTP the one-time sign-in codes go to the log, where any log reader could use them.
  if (production && !smtpUrl) problems.push('SMTP_URL is required in production (without it one-time sign-in codes are written to the log)');
  const chainRpcUrl = url('CHAIN_RPC_URL', ['http:', 'https:', 'ws:', 'wss:']);
  const chainIdRaw = get('CHAIN_ID');
  const chainId = chainIdRaw === undefined ? null : int('CHAIN_ID', 0, 1);
  const confirmations = int('CHAIN_CONFIRMATIONS', 1, 0, 1000);
  if (production && chainRpcUrl && confirmations < 1) problems.push('CHAIN_CONFIRMATIONS must be at least 1 in production');
  const relayerKey = get('CHAIN_RELAYER_KEY') ?? null;
  if (relayerKey && !/^0x[0-9a-fA-F]{64}$/.test(relayerKey)) problems.push('CHAIN_RELAYER_KEY must be a 32-byte hex private key (0x + 64 hex digits)');
  if (production && chainRpcUrl && !relayerKey) problems.push('CHAIN_RELAYER_KEY is required in production when CHAIN_RPC_URL is set');
  const assetAddresses: Record<string, string> = {};
  for (const pair of (get('CHAIN_ASSET_ADDRESSES') ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z0-9]+)=(0x[0-9a-fA-F]{40})$/.exec(pair);
    if (m) assetAddresses[m[1]!.toUpperCase()] = m[2]!;
    else problems.push(`CHAIN_ASSET_ADDRESSES must be SYMBOL=0xADDRESS pairs separated by commas, got "${pair}"`);
  }
  const devBootstrap = bool('CHAIN_DEV_BOOTSTRAP', !production);
  if (production && devBootstrap) problems.push('CHAIN_DEV_BOOTSTRAP is refused when NODE_ENV=production');
  const gasReserveRaw = get('CHAIN_ETH_GAS_RESERVE_WEI') ?? '2100000000000000';
  if (!/^[0-9]{1,30}$/.test(gasReserveRaw)) problems.push(`CHAIN_ETH_GAS_RESERVE_WEI must be an integer number of wei, got "${gasReserveRaw}"`);

  const config: Config = {
    nodeEnv,
    port,
    host,
    baseUrl,
    databaseUrl,
    databasePoolMax: int('DATABASE_POOL_MAX', 20, 1, 1000),
    dataDir: get('DATA_DIR') ?? './.data',
    redisUrl,
    redisPrefix: get('REDIS_PREFIX') ?? 'agentapi:',
    redisCommandTimeoutMs: int('REDIS_COMMAND_TIMEOUT_MS', 2_500, 50, 60_000),
    logLevel,
    masterKey,
    masterKeyPrevious,
    autoMigrate: bool('AUTO_MIGRATE', true),
    runWorker: bool('RUN_WORKER', true),
    settlementDelayMs: int('SETTLEMENT_DELAY_MS', 0, 0, 3_600_000),
    settlementBatchSize: int('SETTLEMENT_BATCH_SIZE', 200, 0, 5000),
    webhookLeaseMs: int('WEBHOOK_LEASE_MS', 60_000, 100, 3_600_000),
    mcp: Object.freeze({
      maxSessionsPerGrant: int('MCP_MAX_SESSIONS_PER_GRANT', 8, 1, 1000),
      sessionIdleMs: int('MCP_SESSION_IDLE_MS', 900_000, 1000, 86_400_000),
      eventPollMs: int('MCP_EVENT_POLL_MS', 1000, 20, 60_000),
    }),
    webhookAttemptTimeoutMs: int('WEBHOOK_ATTEMPT_TIMEOUT_MS', 10_000, 50, 60_000),
    unsafeAllowLoopbackTargets,
    smtpUrl,
    webauthnRpId,
    trustProxy: bool('TRUST_PROXY', false),
    validateResponses: bool('VALIDATE_RESPONSES', !production),
    warmValidators: bool('WARM_VALIDATORS', true),
    shutdownGraceMs: int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    drainDelayMs: int('DRAIN_DELAY_MS', 0, 0, 600_000),
    metricsPort: get('METRICS_PORT') === undefined ? null : int('METRICS_PORT', 0, 0, 65535),
    metricsHost: get('METRICS_HOST') ?? host,
    otlpEndpoint: url('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']),
    serviceName: get('OTEL_SERVICE_NAME') ?? 'agent-api',
    db: {
      // A request waits at most the acquire timeout for a connection, even while one is still being
      // opened (a slow start-up keeps its connection for the next request), so connect may be longer.
      connectTimeoutMs: int('DB_CONNECT_TIMEOUT_MS', 5_000, 100, 600_000),
      acquireTimeoutMs: int('DB_ACQUIRE_TIMEOUT_MS', 4_000, 100, 600_000),
      statementTimeoutMs: int('DB_STATEMENT_TIMEOUT_MS', 3_000, 0, 3_600_000),
      queryTimeoutMs: int('DB_QUERY_TIMEOUT_MS', 3_500, 0, 3_600_000),
    },
    adminToken: get('ADMIN_TOKEN') ?? null,
    agentApiBaseUrl: (url('AGENT_API_BASE_URL', ['http:', 'https:']) ?? listenUrl(host, port)).replace(/\/+$/, ''),
    oauthJwksUri: url('OAUTH_JWKS_URI', ['http:', 'https:']),
    chain: Object.freeze({
      rpcUrl: chainRpcUrl,
      chainId,
      confirmations,
      submitTimeoutMs: int('CHAIN_SUBMIT_TIMEOUT_MS', 120_000, 1000, 86_400_000),
      rebroadcastMs: int('CHAIN_REBROADCAST_MS', 15_000, 100, 3_600_000),
      pollMs: int('CHAIN_POLL_MS', 1000, 10, 60_000),
      relayerKey,
      assetAddresses,
      devBootstrap,
      ethGasReserveWei: /^[0-9]{1,30}$/.test(gasReserveRaw) ? BigInt(gasReserveRaw) : 0n,
      authorizationTtlSeconds: int('CHAIN_AUTHORIZATION_TTL_SECONDS', 3600, 60, 86_400 * 7),
      reconcileIntervalMs: int('CHAIN_RECONCILE_INTERVAL_MS', 300_000, 0, 86_400_000),
      poolPriceIntervalMs: int('CHAIN_POOL_PRICE_INTERVAL_MS', 15_000, 0, 86_400_000),
      depositStartBlock: get('CHAIN_DEPOSIT_START_BLOCK') === undefined ? null : int('CHAIN_DEPOSIT_START_BLOCK', 0, 0),
    }),
  };
  if (config.shutdownGraceMs > 0 && config.drainDelayMs >= config.shutdownGraceMs) problems.push('DRAIN_DELAY_MS must be shorter than SHUTDOWN_GRACE_MS');
  if (config.metricsPort !== null && config.metricsPort !== 0 && config.metricsPort === port) problems.push('METRICS_PORT must differ from PORT');
  if (config.adminToken !== null && config.adminToken.length < 32) problems.push('ADMIN_TOKEN must be at least 32 characters');
  if (config.webhookLeaseMs <= config.webhookAttemptTimeoutMs) problems.push('WEBHOOK_LEASE_MS must exceed WEBHOOK_ATTEMPT_TIMEOUT_MS');
  // The server's own cancellation (a clean error, the connection kept) should arrive before the client gives up on the socket.
  const { statementTimeoutMs, queryTimeoutMs } = config.db;
  if (queryTimeoutMs > 0 && statementTimeoutMs > 0 && queryTimeoutMs <= statementTimeoutMs) problems.push('DB_QUERY_TIMEOUT_MS must exceed DB_STATEMENT_TIMEOUT_MS');
  if (problems.length > 0) throw new ConfigError(problems, production);
  return Object.freeze(config);
}

/**
 * `http://<host>:<port>` as a client reaches a server bound to HOST: IPv6 literals in brackets, and the
 * wildcard addresses (which no client can dial) as localhost. The default BASE_URL and the printed
 * `listening on` line both come from here, so they agree.
 */
export function listenUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}
