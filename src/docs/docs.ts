// Documents for people and agents, rendered from the OpenAPI document: /docs (Redoc, its standalone bundle served from
// node_modules, no CDN) and /llms.txt at start-up, /skill.md on its first request. Public, outside the API envelope.
import type { Express, Response } from 'express';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { OpenApiDocument } from '../lib/contract.js';
import { renderLlmsTxt } from './llms.js';
import { renderSkill } from './skill.js';

export const REDOC_BUNDLE_PATH = '/docs/redoc.standalone.js';
const redocBundle = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
/** The one resource Redoc's bundle loads from elsewhere: its sidebar logo, which our CSP refuses (the console shows it). */
const REDOC_CDN_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

/**
 * The bundle as served: the CDN logo's address becomes `data:,`, an image that fails to decode without a request, so
 * Redoc's own error handler drops the <img>. Read on the first request to the mount that serves it (1.1 MB, kept off
 * the heap as a Buffer).
 */
function redocBundleServed(): { body: Buffer; etag: string } {
  const body = Buffer.from(readFileSync(redocBundle, 'utf8').split(REDOC_CDN_LOGO).join('data:,'));
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/** The reference page: Redoc renders the agent's document in the browser; the other documents are linked above it. */
function docsPage(document: OpenApiDocument): string {
  const title = `${String(document.info?.title ?? 'API')} reference`.replace(/[<>&"]/g, '');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body { margin: 0; } nav { font: 14px/1.5 sans-serif; padding: 6px 16px; border-bottom: 1px solid #ddd; } nav a { margin-right: 1em; }</style>
</head>
<body>
<nav aria-label="Documents">The agent's API, from <a href="/v1/agent/openapi.json">/v1/agent/openapi.json</a>. Also: <a href="/v1/owner/openapi.json">the owner API's document</a> <a href="/v1/admin/openapi.json">the whole document (operator routes included)</a> <a href="/skill.md">/skill.md</a> <a href="/llms.txt">/llms.txt</a></nav>
<redoc spec-url="/v1/agent/openapi.json" required-props-first="true" path-in-middle-panel="true"></redoc>
<script src="${REDOC_BUNDLE_PATH}"></script>
</body>
</html>
`;
}

/**
 * The briefing of /skill.md and /v1/agent/skill.md, one per app: rendered on the first request for it and kept, not at
 * start-up. Rendering builds every MCP tool definition from the document to list the tools (~0.2-0.35 s of CPU and
 * ~10 MB of transient heap, which start-up paid twice, once per mount, and the process kept as committed heap).
 */
export function createSkill(document: OpenApiDocument): () => string {
  let skill: string | undefined;
  return () => (skill ??= renderSkill(document));
}

/** GET /v1/agent/skill.md: the same briefing, public, ahead of the /v1/agent pipeline (which would ask for credentials). */
export function mountAgentSkill(app: Express, deps: { skill: () => string }): void {
  app.get('/v1/agent/skill.md', (_req, res) => {
    res.status(200).type('text/markdown; charset=utf-8').setHeader('Cache-Control', 'public, max-age=300').setHeader('X-Content-Type-Options', 'nosniff').send(deps.skill());
  });
}

export function mountDocs(app: Express, deps: { document: OpenApiDocument; skill: () => string }): void {
  const page = docsPage(deps.document);
  const llms = renderLlmsTxt(deps.document);
  let served: { body: Buffer; etag: string } | undefined;
  const send = (res: Response, type: string, body: string) => res.status(200).type(type).setHeader('Cache-Control', 'public, max-age=300').setHeader('X-Content-Type-Options', 'nosniff').send(body);

  app.get('/docs', (_req, res) => {
    // The page runs only this service's script; Redoc styles inline and starts its search worker from a blob.
    res.setHeader(
      'Content-Security-Policy',
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    );
    send(res, 'text/html; charset=utf-8', page);
  });
  app.get(REDOC_BUNDLE_PATH, (req, res) => {
    const { body, etag } = (served ??= redocBundleServed());
    res.setHeader('ETag', etag).setHeader('Cache-Control', 'public, max-age=86400').setHeader('X-Content-Type-Options', 'nosniff');
    // As the OpenAPI documents answer: a current If-None-Match is 304 whatever Cache-Control the request carries.
    if (
      String(req.headers['if-none-match'] ?? '')
        .split(',')
        .some((tag) => tag.trim() === etag)
    )
      res.status(304).end();
    else res.status(200).type('text/javascript; charset=utf-8').send(body);
  });
  app.get('/skill.md', (_req, res) => send(res, 'text/markdown; charset=utf-8', deps.skill()));
  // Also where Hightop serves it (issue 26, item 12); mounted by mountAgentSkill ahead of the /v1/agent pipeline.
  app.get('/llms.txt', (_req, res) => send(res, 'text/plain; charset=utf-8', llms));
}
