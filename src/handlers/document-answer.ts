// The answer of the three public OpenAPI documents (/v1/agent, /v1/owner, /v1/admin openapi.json): 304 on a current
// If-None-Match, else the document with its strong ETag.
import type { ResponseBody } from '../http/types.js';
import type { ServedDocument } from '../services/self.service.js';

type DocumentOperation = 'getOpenApi' | 'getOwnerOpenApi' | 'getAdminOpenApi';

export function answerDocument<K extends DocumentOperation>(ifNoneMatch: unknown, { document, etag }: ServedDocument) {
  const headers = { ETag: etag, 'Cache-Control': 'public, max-age=300' };
  if (
    typeof ifNoneMatch === 'string' &&
    ifNoneMatch
      .split(',')
      .map((s) => s.trim())
      .includes(etag)
  )
    return { status: 304 as const, body: undefined, headers };
  // Free-form by nature: the document's own schema of it is checked in tests.
  return { status: 200 as const, body: document as ResponseBody<K, 200>, headers };
}
