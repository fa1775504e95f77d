// The layer rules of docs/ARCHITECTURE.md, checked by `npm run lint:layers` (make check, CI).
// Layers, top to bottom: app/server/worker -> http, mcp, handlers, console, oauth -> services ->
// auth, idempotency, ratelimit, webhooks, chain -> db/repositories -> lib. Type-only imports count:
// a type that points up is a dependency that points up.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle makes the load order decide what is defined; cut it by moving the shared part down.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'edges-not-repositories',
      severity: 'error',
      comment: 'HTTP, MCP and handlers translate; they reach data through a service (STYLE habit 2).',
      from: { path: '^src/(http|mcp|handlers)/' },
      to: { path: '^src/db/repositories/' },
    },
    {
      name: 'services-not-edges',
      severity: 'error',
      comment: 'Services decide; they never know the transport (http, mcp, handlers) or the OAuth wiring.',
      from: { path: '^src/services/' },
      to: { path: '^src/(http|mcp|handlers|oauth)/' },
    },
    {
      name: 'lib-is-the-bottom',
      severity: 'error',
      comment: 'src/lib holds pure helpers: it imports nothing of the project outside itself (generated/ is the contract).',
      from: { path: '^src/lib/' },
      to: { path: '^src/', pathNot: '^src/lib/' },
    },
    {
      name: 'repositories-not-services',
      severity: 'error',
      comment: 'Repositories query; they never call business rules.',
      from: { path: '^src/db/repositories/' },
      to: { path: '^src/(services|http|mcp|handlers|oauth|auth|idempotency)/' },
    },
    {
      name: 'auth-not-oauth',
      severity: 'error',
      comment: 'Verifying credentials does not depend on the authorization server wiring (keys are read through repositories).',
      from: { path: '^src/auth/' },
      to: { path: '^src/oauth/' },
    },
    {
      name: 'idempotency-not-http',
      severity: 'error',
      comment: 'The idempotency protocol stores answers; it does not know the HTTP glue.',
      from: { path: '^src/idempotency/' },
      to: { path: '^src/(http|mcp|handlers)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|console)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.d.ts', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
