// openapi-backend as the document's validator, through its public API only: `validateRequest(req, operation)` for an
// operation the router already matched, `validateResponse` / `validateResponseHeaders` for answers. Ajv 2020 + formats.
import { createRequire } from 'node:module';
import { Ajv2020, type Options as AjvOptions } from 'ajv/dist/2020.js';
import type { FormatsPlugin } from 'ajv-formats';
import { OpenAPIBackend, type Document, type Operation, type Request as OabRequest, type ValidationResult } from 'openapi-backend';
import { prepareForBackend, type OpenApiDocument } from './operations.js';

// ajv-formats is CommonJS whose `module.exports` is the plugin; NodeNext types its default import as the namespace.
const addFormats = createRequire(import.meta.url)('ajv-formats') as FormatsPlugin;

/** The compiled request and response validators of one document; one per process can serve every app built over it. */
export interface RequestValidator {
  /** Validates (and coerces the query and path parameters of) a request for an operation already matched. */
  validateRequest(operationId: string, req: OabRequest): ValidationResult<OabRequest>;
  /** Problems of a response against the document (empty when it conforms). */
  validateResponse(operationId: string, status: number, body: unknown, headers: Record<string, string>): string[];
  /** Compiles one operation's request validators ahead of its first request. */
  compileRequestValidators(operationId: string): void;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AjvError = { instancePath?: string; message?: string; params?: Record<string, any> };

/**
 * openapi-backend over the 3.1 document. `quick: true` is its documented start-up option that compiles each
 * operation's validators on first use (~23 ms to start instead of ~10 s for 130 validators; `compileRequestValidators`
 * warms them once the server listens) and skips its definition check, which knows only the 3.0 schema and refuses a
 * 3.1 document (`type: [string, "null"]`): Redocly lints the document instead (`npm run lint:contract`). So no
 * subclass is needed. No handler is registered: the router (src/http/router.ts) matches and dispatches itself, once.
 */
export async function createRequestValidator(document: OpenApiDocument): Promise<RequestValidator> {
  /**
   * One Ajv 2020 instance per distinct option set (openapi-backend asks for a fresh one for every validator it
   * compiles: params with `coerceTypes`, bodies, responses). A fresh Ajv 2020 compiles the draft 2020-12 meta-schema
   * again, so sharing the instance compiles it once. Our schemas carry no `$id`, so they cannot collide in one instance.
   */
  const ajvByOptions = new Map<string, Ajv2020>();
  const sharedAjv = (ajvOpts: AjvOptions): Ajv2020 => {
    // `verbose`: each error carries the schema that failed, whose words (`x-expected`, enum values) make its message.
    const options = { ...ajvOpts, strict: false, allErrors: true, validateFormats: true, verbose: true };
    const key = JSON.stringify(options);
    let ajv = ajvByOptions.get(key);
    if (!ajv) {
      ajv = new Ajv2020(options);
      addFormats(ajv);
      ajvByOptions.set(key, ajv);
    }
    return ajv;
  };
  const api = new OpenAPIBackend<Document>({
    definition: prepareForBackend(document) as Document,
    strict: true,
    quick: true,
    coerceTypes: true,
    ajvOpts: { strict: false, allErrors: true },
    // openapi-backend's types name ajv's draft-07 class; an Ajv2020 instance has the same interface.
    customizeAjv: (_original, ajvOpts) => sharedAjv(ajvOpts) as never,
  });
  await api.init();
  // The flattened operations, read once through the public API (getOperation(id) flattens the document per call).
  const operations = new Map<string, Operation>(api.getOperations().map((op) => [op.operationId!, op]));
  const operationOf = (operationId: string): Operation => {
    const op = operations.get(operationId);
    if (!op) throw new Error(`unknown operation ${operationId}`);
    return op;
  };

  return {
    validateRequest: (operationId, req) => api.validateRequest(req, operationOf(operationId)) as ValidationResult<OabRequest>,
    validateResponse(operationId, status, body, headers) {
      const problems: string[] = [];
      const res = api.validateResponse(body, operationOf(operationId), status);
      for (const e of (res.errors ?? []) as AjvError[]) problems.push(`body${e.instancePath ?? ''} ${e.message ?? ''} ${e.params ? JSON.stringify(e.params) : ''}`.trim());
      const hdr = api.validateResponseHeaders(headers, operationOf(operationId), { statusCode: status });
      for (const e of (hdr.errors ?? []) as AjvError[]) problems.push(`headers${e.instancePath ?? ''} ${e.message ?? ''}`.trim());
      return problems;
    },
    compileRequestValidators(operationId) {
      api.validator.getRequestValidatorsForOperation(operationId);
    },
  };
}
