// @agent-api/sdk: a typed client for the Agent API, generated from its OpenAPI document. No runtime dependencies,
// no node: imports (the node:http webhook helper is the separate `@agent-api/sdk/node` entry).
export { AgentClient, TERMINAL_STATUSES, type ClientOptions, type Credentials, type RetryInfo, type WaitOptions } from './client.js';
export { AgentApiError, AgentNetworkError, WaitTimeoutError, getAgentApiError, getAgentApiErrorByCode, isAgentApiError, isAgentErrorCode } from './errors.js';
export { createIdempotencyKey } from './idempotency.js';
export { verifyWebhookSignature, WebhookVerificationError, type VerifyWebhookInput } from './webhooks.js';
export { ERROR_CODES, OPERATION_STATUSES, OPERATIONS, GROUPS } from './generated/operations.js';
export type * from './types.js';
export type { paths, components, operations } from './generated/api.js';
