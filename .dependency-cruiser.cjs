// The layer rules of docs/ARCHITECTURE.md, checked by `npm run lint:layers` (make check, CI).
// Layers, top to bottom: app/server/worker -> http, mcp, handlers, console, oauth -> services ->
// auth, idempotency, ratelimit, webhooks, chain -> db/repositories -> lib. Type-only imports count:
// a type that points up is a dependency that points up.

/** An import from `from` (a path pattern) to `to` is an error. */
const forbid = (name, comment, from, to) => ({ name, severity: 'error', comment, from: { path: from }, to });

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    forbid('no-circular', 'An import circle makes the load order decide what is defined; cut it by moving the shared part down.', '^src/', { circular: true }),
    forbid('edges-not-repositories', 'HTTP, MCP and handlers translate; they reach data through a service (STYLE habit 2).', '^src/(http|mcp|handlers)/', { path: '^src/db/repositories/' }),
    forbid('services-not-edges', 'Services decide; they never know the transport (http, mcp, handlers) or the OAuth wiring.', '^src/services/', { path: '^src/(http|mcp|handlers|oauth)/' }),
    forbid('lib-is-the-bottom', 'src/lib holds pure helpers: it imports nothing of the project outside itself (generated/ is the contract).', '^src/lib/', { path: '^src/', pathNot: '^src/lib/' }),
    forbid('repositories-not-services', 'Repositories query; they never call business rules or anything above them.', '^src/db/repositories/', {
      path: '^src/(services|http|mcp|handlers|oauth|auth|idempotency)/',
    }),
    forbid('auth-not-oauth', 'Verifying credentials does not depend on the authorization server wiring (auth/signing-keys.ts reads the public keys).', '^src/auth/', { path: '^src/oauth/' }),
    forbid('idempotency-not-http', 'The idempotency protocol stores answers; it does not know the HTTP glue.', '^src/idempotency/', { path: '^src/(http|mcp|handlers)/' }),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|console)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.d.ts', '.json'] },
  },
};
