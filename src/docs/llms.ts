// GET /llms.txt: the service in the llms.txt format (a title, a summary, links), rendered from the OpenAPI document.
import type { OpenApiDocument } from '../lib/contract.js';

export function renderLlmsTxt(document: OpenApiDocument): string {
  const info = document.info ?? {};
  const firstParagraph = String(info.description ?? '')
    .split(/\n\s*\n/)[0]!
    .replace(/\s*\n\s*/g, ' ')
    .trim();
  return [
    `# ${info.title}`,
    '',
    `> ${info.summary ?? ''}`,
    '',
    firstParagraph,
    '',
    '## Docs',
    '',
    `- [Briefing for agents](/skill.md): ${document.paths['/skill.md']?.get?.summary ?? 'Markdown briefing'}: authentication, idempotency, rate limits, money, polling, every error code with what to do, the MCP tools.`,
    `- [API reference](/docs): ${document.paths['/docs']?.get?.summary ?? 'reference page'} (HTML).`,
    `- [OpenAPI document](/v1/agent/openapi.json): the contract (OpenAPI ${document.openapi}) the server validates requests with.`,
    '',
  ].join('\n');
}
