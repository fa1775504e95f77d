// Default addresses: the printed `listening on` address is the issuer, so OAuth discovery through it works.
import { expect } from 'chai';
import * as oidc from 'openid-client';
import { freePort, startServerProcess, type ServerProcess } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

describe('getAuthorizationServerMetadata with the default HOST and BASE_URL', function () {
  this.timeout(90_000);
  let proc: ServerProcess | null = null;
  after(async () => {
    await proc?.stop('SIGKILL');
  });

  it('passes openid-client discovery through the printed address when neither is set', async () => {
    const port = await freePort();
    proc = await startServerProcess({ ...testConfigEnv({ RUN_WORKER: 'false', PORT: String(port) }), HOST: undefined, BASE_URL: undefined });
    const printed = proc.stdoutLines.map((l) => /^listening on (\S+)$/.exec(l.trim())?.[1]).find(Boolean);
    expect(printed, proc.stdoutLines.join('\n')).to.equal(`http://127.0.0.1:${port}`);
    for (const algorithm of ['oidc', 'oauth2'] as const) {
      const config = await oidc.discovery(new URL(printed!), 'any-client', undefined, oidc.None(), { algorithm, execute: [oidc.allowInsecureRequests] });
      expect(config.serverMetadata().issuer).to.equal(printed);
      expect(config.serverMetadata().token_endpoint).to.equal(`${printed}/oauth/token`);
    }
  });
});
