// Composition root: builds pools, clients, services, the router and the Express app; knows how to close them.
import express, { type Express } from 'express';
import type { Knex } from 'knex';
// @redis/client, not the `redis` package: that one is this client plus the module commands (RedisJSON, search,
// time series, bloom; ~1.2 MB of heap at start) that nothing here sends.
import { createClient } from '@redis/client';
import type { Config } from './config.js';
import { createKnex, migrateLatest } from './db/knex.js';
import { handlers } from './handlers/index.js';
import { createAccessLog } from './http/access-log.js';
import { toApiError } from './http/error-mapping.js';
import { createHealthHandlers, type ReadinessCheck } from './http/health.js';
import { loadDocument, readOperations, type OpenApiDocument } from './http/operations.js';
import { createPipeline, createRequestMetricsMiddleware, createRequestTracingMiddleware, requestIdMiddleware } from './http/pipeline.js';
import { apiFirst } from './http/http-server.js';
import type { RequestListener } from 'node:http';
import type { RequestValidator } from './http/request-validator.js';
import { runIdempotent } from './http/steps.js';
import { createRouter, type Router } from './http/router.js';
import { createIdempotency } from './idempotency/idempotency.js';
import { systemClock, type Clock } from './lib/clock.js';
import { errorBody } from './lib/errors.js';
import { createLogger, type Logger } from './lib/logger.js';
import { createMemoryLimiter, createRedisLimiter, type RateLimiter } from './ratelimit/limiter.js';
import { createRateLimitService, type RateLimitService } from './ratelimit/rate-limit.service.js';
import { createAgentService, type AgentCreatedHook } from './services/agent.service.js';
import type { Services } from './services/registry.js';
import type { HandlerMap } from './http/types.js';
import { createSelfService } from './services/self.service.js';
import { createSimulationService } from './services/simulate-onchain.service.js';
import { createPollingLoop, type WorkerLoop } from './worker.js';
import { resolveAdminToken } from './auth/admin-token.js';
import { createPoolPriceRecorder } from './services/defi/pool-prices.js';
import { createBearerVerifier } from './auth/bearer.js';
import { createSealer, type Sealer } from './lib/crypto.js';
import { createOAuthCleanupLoop } from './oauth/cleanup.js';
import { createLoginCodeMailer } from './oauth/mailer.js';
import { createOAuthService } from './oauth/oauth.service.js';
import { mountOAuth } from './oauth/provider.js';
import { mountMcp } from './mcp/mcp.js';
import { mountConsole } from './console/console.js';
import { createSkill, mountAgentSkill, mountDocs } from './docs/docs.js';
import { createDefiArea } from './services/defi/area.js';
import { createLedgerArea } from './services/ledger/area.js';
import { createCustodyService } from './services/custody/accounts.js';
import { createSettlementLoop } from './services/ledger/settlement-loop.js';
import { createEventService } from './services/event.service.js';
import { createPasskeyService } from './services/passkey.service.js';
import { createOwnerService } from './services/owner.service.js';
import { createOwnerOverviewService } from './services/owner-overview.service.js';
import { createWebhookService } from './services/webhook.service.js';
import { createX402Service } from './services/x402/service.js';
import { createDeliveryWorker } from './webhooks/delivery-worker.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { createTracing, SpanKind, type Tracing } from './observability/tracing.js';
import { createUpstreamFetcher, type UpstreamFetcher } from './x402/upstream.js';
import { createFailureWarnings, createWarningMailer } from './webhooks/failure-warnings.js';
import { createApprovalMailer, createApprovalNotices } from './webhooks/approval-mail.js';
import { connectChain, createChainClient } from './chain/connect.js';
import { ChainUnavailableError, type Address, type Chain } from './chain/port.js';
import { createChainInbound, quietWhileDown, type ChainInbound } from './services/chain-inbound.js';

export interface AppOverrides {
  clock?: Clock;
  log?: Logger;
  document?: OpenApiDocument;
  /** Extra or replacement handlers by operationId (tests of the generic machinery). */
  handlers?: Partial<HandlerMap>;
  /** The document's compiled validators, shared by the apps one process builds (the test suite); the app's own otherwise. */
  validator?: RequestValidator;
}

export interface BuiltApp {
  /** The site: every route, /v1/agent included (mounted for spellings the listener leaves to it). */
  app: Express;
  /** What an HTTP server should listen with: /v1/agent first to the API's own app, the rest to `app` (src/http/http-server.ts). */
  listener: RequestListener;
  config: Readonly<Config>;
  db: Knex;
  services: Services;
  router: Router;
  clock: Clock;
  log: Logger;
  loops: WorkerLoop[];
  metrics: Metrics;
  tracing: Tracing;
  /** Turns /readyz to 503 (draining) while in-flight requests finish. */
  startDraining(): void;
  /** Ends the MCP sessions and their SSE streams (long-lived requests a graceful close would wait for). */
  endMcpSessions(): Promise<void>;
  /** The evm chain when CHAIN_RPC_URL is set, else null (the simulated chain). */
  chain: Chain | null;
  close(): Promise<void>;
}

async function connectRedis(config: Readonly<Config>, log: Logger) {
  if (!config.redisUrl) return null;
  const client = createClient({
    url: config.redisUrl,
    // Fail fast while disconnected: a request must not hang on a queued command.
    disableOfflineQueue: true,
    socket: { connectTimeout: 2000, reconnectStrategy: (retries: number) => Math.min(100 * 2 ** retries, 2000) },
  });
  client.on('error', (err: unknown) => log.warn({ err }, 'redis error'));
  // connect() only settles once connected (it retries forever): wait a bounded time, then boot degraded.
  const connecting = client.connect().then(
    () => true,
    () => false,
  );
  const ready = await Promise.race([connecting, new Promise<false>((resolve) => setTimeout(() => resolve(false), 2500).unref())]);
  if (!ready) log.error('redis unreachable at start; retrying in the background');
  return client;
}

/** Core services plus the data stores; agentctl and the worker reuse this without HTTP. */
export async function buildCore(config: Readonly<Config>, overrides: AppOverrides = {}) {
  const tracing = createTracing({ endpoint: config.otlpEndpoint, serviceName: config.serviceName });
  const log = overrides.log ?? createLogger(config.logLevel, tracing.enabled ? () => tracing.currentIds() : undefined);
  const clock = overrides.clock ?? systemClock;
  const db = await createKnex({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: config.databasePoolMax, timeouts: config.db, log });
  tracing.watchKnex(db);
  if (config.autoMigrate) await migrateLatest(db);
  const redis = await connectRedis(config, log);
  const metrics = createMetrics(config.metricsPort !== null);
  metrics.watch({ db, isRedisReady: redis ? () => redis.isReady : null, clock, log });
  const limiter: RateLimiter = redis
    ? traceRedisLimiter(tracing, createRedisLimiter(redis, config.redisPrefix, { timeoutMs: config.redisCommandTimeoutMs, now: () => clock.now().getTime() }))
    : createMemoryLimiter(() => clock.now().getTime());
  const rateLimits: RateLimitService = createRateLimitService({ primary: limiter, fallback: createMemoryLimiter(() => clock.now().getTime()), log, metrics });
  const document = overrides.document ?? loadDocument();
  const sealer = createSealer(config.masterKey, config.masterKeyPrevious);
  const idempotency = createIdempotency({ db, clock, sealer, metrics });
  const onAgentCreated: AgentCreatedHook[] = [];
  // Before the services: the dev bootstrap records the token's address, which the ledger caches on first read.
  const chain = await connectChain({ config, db, sealer, clock, log });
  const services = buildServices({ config, db, clock, log, document, rateLimits, onAgentCreated, sealer, tracing, chain });
  // evm mode: deposits, reconciliation and x402 settlement tracking read the chain through the port.
  let inbound: ChainInbound | null = null;
  if (chain) {
    const codeReader = createChainClient(config.chain.rpcUrl!, chain.chainId, config.chain.pollMs);
    inbound = createChainInbound({
      db,
      chain,
      config: config.chain,
      ledger: services.ledger.ledger,
      operations: services.ledger.operations,
      clock,
      log,
      isDeployed: async (address: Address) => {
        const code = await codeReader.getCode({ address }).catch((err: unknown) => {
          throw new ChainUnavailableError(err);
        });
        return (code ?? '0x') !== '0x';
      },
    });
    // The deposit cursor starts now (a node down at start: the watcher's first tick creates it).
    await inbound.deposits.ensureCursor().catch((err: unknown) => log.warn({ err: err instanceof Error ? err.message.split('\n')[0] : String(err) }, 'deposit cursor not created at start'));
  }
  services.inbound = inbound;
  const loops: WorkerLoop[] = [
    createPollingLoop('idempotency-cleanup', async () => (await idempotency.sealLegacyRecords()) + (await idempotency.deleteExpired()), { idleMs: 60_000, log }),
    createOAuthCleanupLoop({ db, clock, log, sealer }),
    createSettlementLoop({ db, ledger: services.ledger, log, idleMs: chain ? Math.min(100, config.chain.pollMs) : undefined }),
    createDeliveryWorker({
      db,
      clock,
      log,
      sealer,
      leaseMs: config.webhookLeaseMs,
      attemptTimeoutMs: config.webhookAttemptTimeoutMs,
      allowLoopback: config.unsafeAllowLoopbackTargets,
      databaseUrl: config.databaseUrl,
      metrics,
      tracing,
      connectTimeoutMs: config.db.connectTimeoutMs,
    }).loop,
    createFailureWarnings({ db, clock, log, mailer: createWarningMailer({ smtpUrl: config.smtpUrl, log }), owner: services.owner, baseUrl: config.baseUrl }).loop(),
    createApprovalNotices({ db, clock, log, mailer: createApprovalMailer({ smtpUrl: config.smtpUrl, log }), baseUrl: config.baseUrl }).loop(),
    ...(inbound?.loops() ?? []),
    // evm mode: x402 authorizations become executed when used on chain, or fail past valid_before.
    ...(chain
      ? [
          createPollingLoop(
            'x402-onchain',
            quietWhileDown('x402-onchain', () => services.x402.trackOnChain(db), log),
            { idleMs: config.chain.pollMs, log },
          ),
        ]
      : []),
    // evm mode with the DeFi bootstrap: USD prices of the pooled assets from the pools' time-weighted prices.
    ...(chain?.dex && config.chain.poolPriceIntervalMs > 0
      ? [poolPriceLoop(createPoolPriceRecorder({ db, dex: chain.dex, ledger: services.ledger.ledger, clock }), config.chain.poolPriceIntervalMs, log)]
      : []),
  ];
  const close = async () => {
    // quit() waits forever on a client that never connected; destroy() does not.
    if (redis?.isReady) await redis.quit().catch(() => redis.destroy());
    else if (redis?.isOpen) redis.destroy();
    await db.destroy();
    await tracing.shutdown();
  };
  return { config, log, clock, db, redis, metrics, tracing, rateLimits, document, idempotency, services, loops, onAgentCreated, chain, sealer, close };
}

function buildServices(deps: {
  config: Readonly<Config>;
  db: Knex;
  clock: Clock;
  log: Logger;
  document: OpenApiDocument;
  rateLimits: RateLimitService;
  onAgentCreated: AgentCreatedHook[];
  sealer: Sealer;
  tracing: Tracing;
  chain: Chain | null;
}): Services {
  const { clock, document, rateLimits, onAgentCreated, sealer } = deps;
  // The ledger registers its wallet-key hook on onAgentCreated; DeFi registers its settlers on the ledger.
  // evm mode with the agent account factory (issue 24): wallets are AgentAccounts the owner's signer owns.
  const custody = deps.chain?.custody ? createCustodyService({ config: deps.config, chain: deps.chain, sealer, clock, log: deps.log }) : null;
  const ledger = createLedgerArea({ config: deps.config, sealer, clock, log: deps.log, onAgentCreated, chain: deps.chain ?? undefined, custody });
  const owner = createOwnerService({ clock, account: ledger.account });
  return {
    custody,
    agents: createAgentService({ clock, onAgentCreated }),
    ledger,
    defi: createDefiArea({ clock, ledger, dex: deps.chain?.dex ?? null, venue: deps.chain?.earn ?? null, lending: deps.chain?.lending ?? null }),
    webhooks: createWebhookService({ clock, sealer, allowLoopback: deps.config.unsafeAllowLoopbackTargets, log: deps.log }),
    x402: createX402Service({ config: deps.config, sealer, clock, ledger, log: deps.log, fetcher: traceUpstream(deps.tracing, deps.config), chain: deps.chain }),
    oauth: createOAuthService({
      clock,
      sealer,
      masterKey: deps.config.masterKey,
      mailer: createLoginCodeMailer({ smtpUrl: deps.config.smtpUrl, log: deps.log, nodeEnv: deps.config.nodeEnv }),
      log: deps.log,
      nodeEnv: deps.config.nodeEnv,
    }),
    self: createSelfService({ document, ops: readOperations(document) }),
    rateLimits,
    owner,
    ownerOverview: createOwnerOverviewService({ clock, owner, account: ledger.account, policy: ledger.policy }),
    passkeys: createPasskeyService({ clock, baseUrl: deps.config.baseUrl, rpId: deps.config.webauthnRpId }),
    events: createEventService(),
    inbound: null,
    simulation: createSimulationService({ chain: deps.chain, ledger: ledger.ledger }),
  };
}

/** Each Redis rate-limit call as a client span (only when tracing is on). */
function traceRedisLimiter(tracing: Tracing, limiter: RateLimiter): RateLimiter {
  if (!tracing.enabled) return limiter;
  return {
    ...limiter,
    consume: (key, rule, cost) => tracing.span('redis EVALSHA ratelimit', { 'db.system.name': 'redis', 'db.operation.name': 'EVALSHA' }, () => limiter.consume(key, rule, cost), SpanKind.CLIENT),
  };
}

/** The x402 seller requests as client spans; undefined (the service's own default) when tracing is off. */
function traceUpstream(tracing: Tracing, config: Readonly<Config>): UpstreamFetcher | undefined {
  if (!tracing.enabled) return undefined;
  const fetcher = createUpstreamFetcher({ allowLoopback: config.unsafeAllowLoopbackTargets });
  return (req) =>
    tracing.span(
      `x402 ${req.method}`,
      { 'http.request.method': req.method, 'url.full': req.url },
      async (span) => {
        const res = await fetcher(req);
        span.setAttribute('http.response.status_code', res.status);
        return res;
      },
      SpanKind.CLIENT,
    );
}

/** What /readyz checks, by name; a new dependency (a chain node) is one more entry. */
function readinessChecks(core: Pick<Awaited<ReturnType<typeof buildCore>>, 'db' | 'redis' | 'tracing'>): ReadinessCheck[] {
  const { db, redis } = core;
  const checks: ReadinessCheck[] = [{ name: 'database', check: () => db.raw('SELECT 1') }];
  if (redis) checks.push({ name: 'redis', check: () => core.tracing.span('redis PING', { 'db.system.name': 'redis' }, () => redis.ping(), SpanKind.CLIENT) });
  return checks;
}

export async function createApp(config: Readonly<Config>, overrides: AppOverrides = {}): Promise<BuiltApp> {
  const core = await buildCore(config, overrides);
  const { db, log, clock, services } = core;
  const router = await createRouter({ document: core.document, handlers: { ...handlers, ...(overrides.handlers ?? {}) }, around: runIdempotent(core.idempotency), validator: overrides.validator });
  // One set of request-handling dependencies for the /v1/agent pipeline and the MCP endpoint.
  const httpDeps = {
    config,
    db,
    clock,
    log,
    router,
    services,
    rateLimits: core.rateLimits,
    document: core.document,
    bearer: createBearerVerifier({ config, db, clock }),
    adminToken: resolveAdminToken(config),
    redis: core.redis,
  };
  const pipeline = createPipeline(httpDeps);

  const configured = (): Express => {
    const a = express();
    a.disable('x-powered-by');
    a.set('trust proxy', config.trustProxy);
    a.set('etag', false);
    return a;
  };
  // What runs before any route, for the site and the API alike: request id, access line, and metrics and tracing when on.
  const edge = [
    requestIdMiddleware,
    createAccessLog(log),
    ...(core.metrics.registry ? [createRequestMetricsMiddleware(core.metrics)] : []),
    ...(core.tracing.enabled ? [createRequestTracingMiddleware(core.tracing)] : []),
  ];
  const app = configured();
  app.use(edge);
  // app.use, not a `*splat` route: Express would decode the splat and throw on malformed escapes. Mounted first:
  // no other route shares these prefixes, and the API's requests then skip the other routes' matching.
  const skill = createSkill(core.document);
  mountAgentSkill(app, { skill });
  app.use('/v1/agent', pipeline.agentApi);
  app.use(['/v1/owner', '/v1/admin'], pipeline.ownerApi);
  const health = createHealthHandlers({ checks: readinessChecks(core), chainHealth: core.chain ? () => core.chain!.health() : null });
  app.get('/healthz', health.healthz);
  app.get('/readyz', health.readyz);
  mountOAuth(app, { config, db, clock, log, services, sealer: core.sealer });
  const mcp = mountMcp(app, httpDeps);
  mountConsole(app, { config, db, services, log });
  mountDocs(app, { document: core.document, skill });
  app.use((_req, res) => {
    res.status(404).json(errorBody('not_found', 'No route matches this request.'));
  });
  // Last resort for errors raised by Express or a mounted library: the envelope, never a stack trace.
  const lastResort = (err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const status = (err as { status?: number }).status;
    if ((typeof status === 'number' && status >= 400 && status < 500) || err instanceof URIError) {
      res.status(400).json(errorBody('validation_failed', 'The request could not be parsed.', { errors: [{ location: 'path', message: 'malformed request' }] }));
      return;
    }
    const apiError = toApiError(err);
    if (apiError) {
      for (const [name, value] of Object.entries(apiError.headers)) res.setHeader(name, value);
      res.status(apiError.status).json(errorBody(apiError.code, apiError.message, apiError.details));
      return;
    }
    log.error({ err }, 'unhandled error outside the API pipeline');
    res.status(500).json(errorBody('internal_error', `An internal error occurred (request ${String(res.getHeader('X-Request-Id') ?? '')}).`));
  };
  app.use(lastResort);
  // /v1/agent's own app: the same edge, then the entry (which answers every request it is given).
  const agentApp = configured();
  agentApp.use(edge);
  agentApp.use(pipeline.agentApi);
  agentApp.use(lastResort);

  return {
    app,
    listener: apiFirst(agentApp, app),
    config,
    db,
    services,
    router,
    clock,
    log,
    loops: core.loops,
    metrics: core.metrics,
    tracing: core.tracing,
    startDraining: health.startDraining,
    endMcpSessions: () => mcp.close(),
    chain: core.chain,
    close: async () => {
      await mcp.close();
      await core.close();
    },
  };
}

/** Records pool prices every `idleMs` (a pass is never "work": the loop always waits). */
function poolPriceLoop(record: () => Promise<unknown>, idleMs: number, log: Logger): WorkerLoop {
  return createPollingLoop('pool-prices', async () => (await record(), 0), { idleMs, log });
}
