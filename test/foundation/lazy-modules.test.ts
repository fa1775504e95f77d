// Start-up footprint (issue 12 P4): the compiled server's start-up module graph leaves out the packages that load on
// first use (viem, the MCP SDK, oidc-provider, nodemailer, the OpenTelemetry SDK, prom-client, jose,
// @simplewebauthn/server with @peculiar/* and asn1js, got, Node's bundled undici; never: the `redis` package's module
// commands), and code that needs viem, @simplewebauthn/server or got works when it is the first to load it. Runs dist/
// (built by `pretest:file`) in a child process that records every module loaded, through `import` or `require`.
// agentctl's start-up too (issue 25 item 6): a command sent to a server loads neither the app nor knex, pg, Express or
// viem (src/cli/local.ts holds what a command run on the database needs).
import { expect } from 'chai';
import { execFileSync, spawnSync } from 'node:child_process';
import { repoRoot } from '../helpers/process.js';

const LAZY =
  /\/node_modules\/(viem|ox|@scure|@noble|@modelcontextprotocol|oidc-provider|nodemailer|prom-client|jose|@simplewebauthn|@peculiar|asn1js|got|@redis\/(?!client\/)[^/]+|@opentelemetry\/(?!api\/)[^/]+)\//;

/**
 * Imports what dist/src/server.js imports (without starting it), lists the packages loaded (and Node's bundled undici,
 * which an ESM import of node:http loads through its lazy WebSocket export), then runs `after`.
 */
function inChild(after: string): { loaded: string[]; result: unknown } {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
    for (const m of ['app', 'chain/connect', 'config', 'demo', 'http/http-server', 'lib/logger', 'observability/metrics', 'worker']) await import('./dist/src/' + m + '.js');
    const atStart = [...loaded.filter((u) => ${LAZY}.test(u)), ...process.moduleLoadList.filter((m) => /undici/.test(m))];
    const result = await (async () => { ${after} })();
    process.stdout.write(JSON.stringify({ loaded: atStart, result }));
  `;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' })) as { loaded: string[]; result: unknown };
}

describe('start-up module graph (dist)', function () {
  this.timeout(60_000);

  it('loads none of the on-first-use packages, and a wallet key and a simulated transaction hash work when they are the first to need viem', () => {
    const { loaded, result } = inChild(`
      const { generateWalletKey } = await import('./dist/src/lib/wallet-keys.js');
      const { txHashOf } = await import('./dist/src/chain/simulated.js');
      const key = generateWalletKey({ seal: (s) => 'sealed:' + s, open: (s) => s.slice(7) });
      return { address: key.address, sealed: key.sealedPrivateKey.startsWith('sealed:0x'), txHash: txHashOf('op_1') };
    `);
    expect(loaded, 'loaded at start').to.deep.equal([]);
    const { address, sealed, txHash } = result as { address: string; sealed: boolean; txHash: string };
    expect(address).to.match(/^0x[0-9a-fA-F]{40}$/);
    expect(sealed).to.equal(true);
    // keccak256 of "agent-api:tx:op_1", as computed when viem was imported statically
    expect(txHash).to.equal('0x8d7e7aca19c1a134708cba2edfc4eaa1248aac61f631276f02d04ac2da77151c');
  });

  it('reads a passkey public key and sends an x402 request when they are the first to need @simplewebauthn/server and got', () => {
    // A COSE EC2 P-256 ES256 key (CBOR map {1: 2, 3: -7, -1: 1, -2: x, -3: y}) with x = 0x11…, y = 0x22….
    const cose = `a5010203262001215820${'11'.repeat(32)}225820${'22'.repeat(32)}`;
    const { result } = inChild(`
      const { p256Coordinates } = await import('./dist/src/services/passkey.service.js');
      const { createUpstreamFetcher } = await import('./dist/src/x402/upstream.js');
      const { createServer } = await import('node:net');
      const closed = createServer();
      await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = closed.address().port;
      await new Promise((resolve) => closed.close(resolve));
      const fetcher = createUpstreamFetcher({ allowLoopback: true });
      const refused = await fetcher({ url: 'https://127.0.0.1:' + port + '/', method: 'GET', timeoutMs: 5000 }).then(() => null, (err) => ({ code: err.code, details: err.details }));
      return { key: p256Coordinates(Buffer.from('${cose}', 'hex')), refused };
    `);
    expect(result).to.deep.equal({
      key: { qx: `0x${'11'.repeat(32)}`, qy: `0x${'22'.repeat(32)}` },
      // got connected (and was refused): the request went out through it, not through a missing module's error.
      refused: { code: 'upstream_error', details: { reason: 'network_error' } },
    });
  });
});

describe('agentctl start-up (dist)', function () {
  this.timeout(60_000);

  it('parses a command and reaches the server without loading the app, knex, pg, Express or viem (they load only for a command run on the database)', () => {
    // `agentctl --help` imports everything a command sent to a server needs (the command table, the client, the
    // config, the owner-key helpers) and exits; every module it loaded is listed as it exits.
    const script = `
      import { registerHooks } from 'node:module';
      import { writeSync } from 'node:fs';
      const loaded = [];
      registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
      process.on('exit', () => writeSync(2, JSON.stringify(loaded)));
      process.argv = [process.argv[0], 'agentctl', '--help'];
      await import('./dist/scripts/agentctl.js');
    `;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' });
    expect(out.stdout).to.match(/^usage: agentctl/);
    const loaded = JSON.parse(out.stderr) as string[];
    expect(loaded.some((u) => u.endsWith('/dist/src/cli/index.js'))).to.equal(true);
    const heavy = loaded.filter((u) => /\/node_modules\/(knex|pg|express|viem|ox|@noble)\/|\/dist\/src\/(app|db\/knex|chain\/connect)\.js$/.test(u));
    expect(heavy).to.deep.equal([]);
  });
});
