// The document's types for the layers below HTTP (services take and return these shapes): named
// schemas, the operation table's row and the response value, so nothing has to import upwards.
import type { components, operations } from '../../generated/api.js';

export type OperationId = keyof operations;
/** A named schema of the document (`#/components/schemas/<N>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type OpenApiDocument = Record<string, any>;

export type IdempotencyMode = 'required' | 'optional' | 'none';

/** One operation of the document with the extensions the code reads (`x-rate-limit-class`, ...). */
export interface OperationMeta {
  operationId: string;
  method: string;
  path: string;
  tag: string;
  rateClass: Schema<'RateClass'>;
  scope: string | null;
  /** Alternative scopes that also satisfy the route (webhook GETs also take agent:webhooks:manage). */
  altScopes: string[];
  idempotency: IdempotencyMode;
  isPublic: boolean;
}

/** A response as it leaves the pipeline (any status: errors are written here too). */
export interface HandlerResult {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}
