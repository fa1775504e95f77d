// The real server in production mode (issue 10 item 15): every line it writes is JSON, and every
// request, whichever part of the app answers it, gets exactly one access line with its request id.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startServerProcess, type ServerProcess } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

describe('server logs', function () {
  this.timeout(90_000);
  let proc: ServerProcess | null = null;
  after(async () => {
    await proc?.stop('SIGKILL');
  });

  it('writes only JSON lines and one access line per request when NODE_ENV is production', async () => {
    proc = await startServerProcess(testConfigEnv({ NODE_ENV: 'production', LOG_LEVEL: 'info', RUN_WORKER: 'false', BASE_URL: 'http://127.0.0.1:1', SMTP_URL: 'smtp://127.0.0.1:1' }));
    const requests: Array<[string, string, string | undefined]> = [
      ['GET', '/healthz', undefined],
      ['GET', '/readyz', undefined],
      ['GET', '/.well-known/oauth-authorization-server', undefined],
      ['GET', '/.well-known/oauth-protected-resource/v1/agent', undefined],
      ['GET', '/oauth/jwks', undefined],
      ['POST', '/oauth/token', 'grant_type=bogus'],
      ['GET', '/connect/no-such-interaction', undefined],
      ['POST', '/mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'],
      ['GET', '/v1/agent/self', undefined],
      ['GET', '/v1/agent/openapi.json', undefined],
      ['GET', '/no/such/route', undefined],
    ];
    const ids = new Map<string, string>();
    for (const [method, path, body] of requests) {
      const id = `log-${randomBytes(6).toString('hex')}`;
      ids.set(id, `${method} ${path}`);
      const contentType = path.startsWith('/oauth') ? 'application/x-www-form-urlencoded' : 'application/json';
      const res = await fetch(`${proc.baseUrl}${path}`, { method, body, headers: { 'x-request-id': id, 'content-type': contentType, accept: 'application/json, text/event-stream' } });
      await res.arrayBuffer();
    }
    await proc.stop('SIGTERM');

    const lines = [...proc.stdoutLines, ...proc.stderr().split('\n')].filter((l) => l.trim() !== '');
    const notJson = lines.filter((l) => {
      try {
        return typeof JSON.parse(l) !== 'object';
      } catch {
        return true;
      }
    });
    expect(notJson, 'lines that are not JSON').to.deep.equal([]);
    const access = lines.map((l) => JSON.parse(l) as { msg?: string; requestId?: string; status?: number }).filter((l) => l.msg === 'request');
    for (const [id, what] of ids) {
      const mine = access.filter((l) => l.requestId === id);
      expect(mine, `access lines for ${what}`).to.have.length(1);
      expect(mine[0]!.status, what).to.be.a('number');
    }
  });
});
