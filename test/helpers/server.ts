// In-process test server on an ephemeral port: real Postgres (the test file's database), real Redis (its own prefix).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { createApp, type BuiltApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Clock } from '../../src/lib/clock.js';
import { createHttpServer } from '../../src/http/http-server.js';
import { loadDocument } from '../../src/http/operations.js';
import { createRequestValidator, type RequestValidator } from '../../src/http/request-validator.js';
import type { HandlerMap } from '../../src/http/types.js';
import type { Services } from '../../src/services/registry.js';
import { createWorker, type Worker } from '../../src/worker.js';
import { testEnv } from '../setup.js';
import { createTestAgent, type AgentOptions } from '../support/agents.js';

export interface TestAgent {
  agentId: string;
  walletId: string;
  ownerId: string;
  apiKey: string;
  headers: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

export interface RequestOptions {
  agent?: TestAgent;
  body?: unknown;
  /** Raw body bytes sent as-is (for malformed JSON and size tests). */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  idempotencyKey?: string;
}

export interface TestServer {
  baseUrl: string;
  db: Knex;
  services: Services;
  clock: Clock;
  config: Readonly<Config>;
  built: BuiltApp;
  server: Server;
  /** An agent of the server's owner (or `ownerId`'s), with the policy, funds and rate limits asked for. */
  createAgent(opts?: AgentOptions): Promise<TestAgent>;
  request(method: string, path: string, opts?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export function testConfigEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: testEnv.databaseUrl,
    REDIS_URL: testEnv.redisUrl,
    REDIS_PREFIX: `${testEnv.redisPrefix}${randomBytes(3).toString('hex')}:`,
    AUTO_MIGRATE: 'false',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || 'silent',
    MASTER_KEY: 'test-master-key-0123456789abcdef0123456789',
    VALIDATE_RESPONSES: 'true',
    ...extra,
  };
}

/**
 * One compiled validator set per test process, shared by the apps its files build over the bundled document:
 * compiling one operation's validators costs ~90 ms, which each app would otherwise pay again.
 */
let sharedValidator: Promise<RequestValidator> | undefined;
export const sharedRequestValidator = (): Promise<RequestValidator> => (sharedValidator ??= createRequestValidator(loadDocument()));

export async function startTestServer(opts: { clock?: Clock; env?: Record<string, string>; worker?: boolean; handlers?: Partial<HandlerMap> } = {}): Promise<TestServer> {
  const server = createHttpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;
  const config = loadConfig(testConfigEnv({ PORT: String(port), BASE_URL: baseUrl, ...(opts.env ?? {}) }), () => {});
  const built = await createApp(config, { clock: opts.clock, handlers: opts.handlers, validator: await sharedRequestValidator() });
  server.on('request', built.listener);
  let worker: Worker | null = null;
  if (opts.worker) {
    worker = createWorker({ loops: built.loops, log: built.log });
    worker.start();
  }
  let ownerId: string | null = null;

  const createAgent: TestServer['createAgent'] = async (agentOpts = {}) => {
    if (!agentOpts.ownerId && !ownerId) ownerId = (await built.services.agents.createOwner(built.db, { email: `owner-${randomBytes(6).toString('hex')}@example.com` })).owner_id;
    const created = await createTestAgent({ db: built.db, agents: built.services.agents, ledger: built.services.ledger }, { ...agentOpts, ownerId: agentOpts.ownerId ?? ownerId! });
    return { ...created, headers: { 'x-agent-id': created.agentId, 'x-api-key': created.apiKey } };
  };

  const request: TestServer['request'] = async (method, path, reqOpts = {}) => {
    const headers: Record<string, string> = { ...(reqOpts.agent?.headers ?? {}), ...(reqOpts.headers ?? {}) };
    if (reqOpts.idempotencyKey !== undefined) headers['Idempotency-Key'] = reqOpts.idempotencyKey;
    let body: string | Buffer | undefined;
    if (reqOpts.rawBody !== undefined) body = reqOpts.rawBody;
    else if (reqOpts.body !== undefined) body = JSON.stringify(reqOpts.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: callers read `text`
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    baseUrl,
    db: built.db,
    services: built.services,
    clock: built.clock,
    config,
    built,
    server,
    createAgent,
    request,
    async close() {
      await worker?.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await built.close();
    },
  };
}

export const newKey = (): string => `key-${randomBytes(8).toString('hex')}`;

/** An agent with the embedded demo's policy and funds whose rate limits stay out of the way. */
export async function createDemoAgent(server: TestServer, limit = 100_000): Promise<TestAgent> {
  return server.createAgent({ demo: true, rateLimit: { limit, classes: ['read', 'write', 'simulate', 'webhook_management', 'bulk_write'] } });
}
