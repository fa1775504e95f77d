// Audit D: SSRF and outbound-request safety (spec 6.4, 3.2; contract §11, §13) for the vectors that
// test/webhooks/url-safety.unit.test.ts, delivery.test.ts and test/x402/* do not already demonstrate.
import { expect } from 'chai';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { ApiError } from '../../src/lib/errors.js';
import { createSender } from '../../src/webhooks/sender.js';
import {
  assertPublicHttpsUrl,
  createPinnedAgent,
  DnsResolutionError,
  isPublicAddress,
  parsePublicHttpsUrl,
  UrlRejectedError,
  type ResolvedAddress,
  type Resolver,
} from '../../src/webhooks/url-safety.js';
import { createUpstreamFetcher, MAX_UPSTREAM_BODY_BYTES } from '../../src/x402/upstream.js';
import { newKey, startTestServer, type TestServer } from '../helpers/server.js';
import { createTestPki, type TestPki } from '../webhooks/helpers/receiver.js';

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });
/** A resolver with no DNS at all, like a sandbox without a name server. */
const noDns: Resolver = async (hostname) => {
  throw Object.assign(new Error(`NXDOMAIN ${hostname}`), { code: 'ENOTFOUND' });
};
const table =
  (answers: Record<string, ResolvedAddress[]>): Resolver =>
  async (hostname) => {
    const answer = answers[hostname];
    if (!answer) throw Object.assign(new Error(`NXDOMAIN ${hostname}`), { code: 'ENOTFOUND' });
    return answer;
  };

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

interface Recorded {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
}

/** A loopback HTTPS server (certificate for 127.0.0.1, ::1 and hooks.example.com) with per-path handlers. */
async function startTarget(pki: TestPki) {
  const requests: Recorded[] = [];
  const routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();
  const held: ServerResponse[] = [];
  const server: Server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    req.resume();
    const route = routes.get((req.url ?? '').split('?')[0]!);
    if (route) return route(req, res);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    requests,
    routes,
    held,
    url: (path: string) => `https://127.0.0.1:${port}${path}`,
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('audit D: SSRF and outbound-request safety', function () {
  this.timeout(30_000);

  describe('URL and host rules (spec 6.4)', () => {
    it('refuses names that spell a non-public IPv4 address or sit in a loopback zone, without needing DNS', async () => {
      for (const url of [
        'https://127.0.0.1.nip.io/hook',
        'https://app.10.0.0.1.nip.io/hook',
        'https://169.254.169.254.sslip.io/latest',
        'https://app-192-168-1-1.sslip.io/hook',
        'https://169-254-169-254.nip.io/hook',
        'https://customer.LOCALTEST.ME./hook',
        'https://lvh.me/hook',
        'https://x.vcap.me/hook',
      ]) {
        const err = await failure(assertPublicHttpsUrl(url, { resolver: noDns }));
        expect(err, url).to.be.instanceOf(UrlRejectedError);
      }
      // A public address spelled in a name is fine when every resolved address is public.
      const ok = await assertPublicHttpsUrl('https://8.8.8.8.nip.io/hook', { resolver: table({ '8.8.8.8.nip.io': [v4('8.8.8.8')] }) });
      expect(ok.addresses).to.deep.equal([v4('8.8.8.8')]);
    });

    it('normalises upper case, trailing dots, IDN and full-width forms before judging the host', async () => {
      expect(parsePublicHttpsUrl('https://HOOKS.Example.COM./x').hostname).to.equal('hooks.example.com');
      expect(parsePublicHttpsUrl('https://b\u00fccher.example.com/x').hostname).to.equal('xn--bcher-kva.example.com');
      for (const url of [
        'https://LOCALHOST./x',
        'https://Metadata.Google.Internal./x',
        'https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/x',
        'https://loc%61lhost/x',
        'https://127.0.0.1../x',
        'https://metadata/x',
      ]) {
        expect(() => parsePublicHttpsUrl(url), url).to.throw(UrlRejectedError);
      }
    });

    it('refuses every userinfo and backslash trick but treats @ in the path or query as path', () => {
      for (const url of [
        'https://evil@127.0.0.1/',
        'https://hooks.example.com@127.0.0.1/',
        'https:evil@127.0.0.1/',
        'https://127.0.0.1:443@hooks.example.com/',
        'https://hooks.example.com%2f@127.0.0.1/',
        'https:\\\\127.0.0.1/',
        'https://hooks.example.com\\@127.0.0.1/',
      ]) {
        expect(() => parsePublicHttpsUrl(url), url).to.throw(UrlRejectedError);
      }
      const target = parsePublicHttpsUrl('https://hooks.example.com/a@127.0.0.1?next=@10.0.0.1');
      expect(target.hostname).to.equal('hooks.example.com');
      expect(target.url.pathname).to.equal('/a@127.0.0.1');
    });

    it('refuses raw CR, LF, tab and space (header injection) and keeps encoded ones encoded', () => {
      for (const url of [
        'https://hooks.example.com/\r\nX-Injected: 1',
        'https://hooks.example.com/a\nb',
        'https://hooks.example.com/\tx',
        'https://hooks.example.com/a b',
        'https://hooks.example.com\r\n.evil/',
      ]) {
        expect(() => parsePublicHttpsUrl(url), JSON.stringify(url)).to.throw(UrlRejectedError);
      }
      expect(parsePublicHttpsUrl('https://hooks.example.com/%0d%0aX-Injected:1').url.pathname).to.equal('/%0d%0aX-Injected:1');
    });

    it('accepts any port from 1 to 65535 (receivers choose theirs) and refuses port 0', () => {
      expect(parsePublicHttpsUrl('https://hooks.example.com:8443/x').port).to.equal(8443);
      expect(parsePublicHttpsUrl('https://hooks.example.com:65535/x').port).to.equal(65535);
      expect(parsePublicHttpsUrl('https://hooks.example.com:443/x').port).to.equal(443);
      expect(() => parsePublicHttpsUrl('https://hooks.example.com:0/x')).to.throw(UrlRejectedError);
      expect(() => parsePublicHttpsUrl('https://hooks.example.com:65536/x')).to.throw(UrlRejectedError);
    });

    it('classifies the boundaries of every denied range', () => {
      const denied = [
        '0.0.0.0',
        '0.255.255.255',
        '100.64.0.0',
        '100.127.255.255',
        '169.254.169.254',
        '198.18.0.0',
        '198.19.255.255',
        '240.0.0.1',
        '255.255.255.255',
        '224.0.0.1',
        '192.0.0.170',
        '192.88.99.1',
        '::',
        '::1',
        'fe80::1',
        'febf:ffff::1',
        'fc00::',
        'fdff:ffff::1',
        'fec0::1',
        'ff02::1',
        '::ffff:169.254.169.254',
        '::ffff:a9fe:a9fe',
        '::a9fe:a9fe',
        '::ffff:0:a9fe:a9fe',
        '64:ff9b::7f00:1',
        '64:ff9b::808:808',
        '64:ff9b:1::a9fe:a9fe',
        '2002:a9fe:a9fe::1',
        '2002:808:808::1',
        '2001::1',
        '2001:0:4136:e378:8000:63bf:3fff:fdd2',
        '2001:db8::1',
        'fd00:ec2::254',
      ];
      for (const address of denied) expect(isPublicAddress(address), address).to.equal(false);
      for (const address of ['1.1.1.1', '99.255.255.255', '100.63.255.255', '100.128.0.0', '198.17.255.255', '198.20.0.0', '223.255.255.255', '::ffff:8.8.8.8', '2606:4700::1111', '2a00:1450::1']) {
        expect(isPublicAddress(address), address).to.equal(true);
      }
    });

    it('refuses a name when ANY resolved address is non-public, whatever the order or family', async () => {
      const answers = {
        'a.example.com': [v4('8.8.8.8'), v4('10.0.0.1')],
        'b.example.com': [v6('fd00::1'), v4('8.8.8.8')],
        'c.example.com': [v4('8.8.8.8'), v6('::ffff:127.0.0.1')],
        'd.example.com': [v6('2606:4700::1111'), v6('64:ff9b::a9fe:a9fe')],
      };
      for (const host of Object.keys(answers)) {
        const err = await failure(assertPublicHttpsUrl(`https://${host}/x`, { resolver: table(answers) }));
        expect(err, host).to.be.instanceOf(UrlRejectedError);
      }
    });

    it('admits only loopback IP literals with the unsafe flag: never names, never other private ranges', async () => {
      for (const url of ['https://127.0.0.2:9/x', 'https://[::1]:9/x', 'https://2130706433:9/x']) {
        expect((await assertPublicHttpsUrl(url, { allowLoopback: true, resolver: noDns })).addresses).to.have.length(1);
      }
      const loopbackByName = table({ 'loop.example.com': [v4('127.0.0.1')] });
      for (const url of [
        'https://loop.example.com/x',
        'https://localhost/x',
        'https://10.0.0.1/x',
        'https://169.254.169.254/x',
        'https://[::ffff:127.0.0.1]/x',
        'https://0.0.0.0/x',
        'https://[::]/x',
        'http://127.0.0.1/x',
      ]) {
        const err = await failure(assertPublicHttpsUrl(url, { allowLoopback: true, resolver: loopbackByName }));
        expect(err, url).to.be.instanceOf(UrlRejectedError);
      }
    });
  });

  describe('createWebhook over HTTP with the real resolver', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer();
    });
    after(() => server.close());

    it('answers 200 for a public name that does not resolve from here (delivery resolves and checks it again)', async () => {
      const agent = await server.createAgent();
      // RFC 2606: .example never resolves anywhere, so this holds with or without DNS.
      const res = await server.request('POST', '/v1/agent/webhooks', {
        agent,
        body: { url: 'https://hooks.partner.example/agent-events', event_types: ['payment.executed'] },
        idempotencyKey: newKey(),
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.webhook.url).to.equal('https://hooks.partner.example/agent-events');
      const patched = await server.request('PATCH', `/v1/agent/webhooks/${res.body.webhook.id}`, { agent, body: { url: 'https://other.partner.example/x' }, idempotencyKey: newKey() });
      expect(patched.status, JSON.stringify(patched.body)).to.equal(200);
    });

    it('answers 400 validation_failed for names embedding private addresses even without DNS', async () => {
      const agent = await server.createAgent();
      for (const url of ['https://127.0.0.1.nip.io/x', 'https://169-254-169-254.sslip.io/x', 'https://app.localtest.me/x', 'https://127.0.0.1/x']) {
        const res = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url, event_types: ['payment.executed'] }, idempotencyKey: newKey() });
        expect(res.status, url).to.equal(400);
        expect(res.body.error.code, url).to.equal('validation_failed');
      }
    });
  });

  describe('pinned connections (DNS rebinding)', () => {
    let pki: TestPki;
    let target: Awaited<ReturnType<typeof startTarget>>;
    before(async () => {
      pki = await createTestPki();
      target = await startTarget(pki);
    });
    after(() => target.close());

    it('connects the pinned agent to the validated address, never re-resolving the name', async () => {
      // hooks.example.com has no DNS answer pointing here: only the pinned lookup can reach this server.
      const agent = createPinnedAgent({ addresses: [v4('127.0.0.1')], ca: pki.ca });
      try {
        const status = await new Promise<number>((resolve, reject) => {
          const req = httpsRequest({ host: 'hooks.example.com', port: target.port, path: '/pinned', agent }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.end();
        });
        expect(status).to.equal(200);
        expect(target.requests.filter((r) => r.path === '/pinned')).to.have.length(1);
      } finally {
        agent.destroy();
      }
    });

    it('refuses to connect when the pinned set has no address of the family asked for', async () => {
      const agent = createPinnedAgent({ addresses: [v6('2606:4700::1111')], ca: pki.ca });
      try {
        const err = await new Promise<unknown>((resolve) => {
          const req = httpsRequest({ host: 'hooks.example.com', port: target.port, path: '/v4only', agent, family: 4 }, () => resolve(null));
          req.on('error', resolve);
          req.end();
        });
        expect(err).to.be.instanceOf(Error);
        expect(target.requests.filter((r) => r.path === '/v4only')).to.have.length(0);
      } finally {
        agent.destroy();
      }
    });

    it('delivers a webhook through the pinned address with the host name kept for SNI, and keeps an encoded CRLF in the path', async () => {
      const sender = createSender({ ca: pki.ca, keepAlive: false });
      try {
        const safe = parsePublicHttpsUrl(`https://hooks.example.com:${target.port}/wh/%0d%0aX-Injected:1`);
        const result = await sender.send({ target: { ...safe, addresses: [v4('127.0.0.1')] }, body: '{}', headers: { 'Content-Type': 'application/json' }, signal: AbortSignal.timeout(5000) });
        expect(result).to.include({ httpStatus: 200, errorClass: null });
        const seen = target.requests.find((r) => r.path.startsWith('/wh/'));
        expect(seen?.path).to.equal('/wh/%0d%0aX-Injected:1');
        expect(seen?.headers).not.to.have.property('x-injected');
        expect(seen?.headers['accept-encoding']).to.equal('identity');
      } finally {
        sender.close();
      }
    });
  });

  describe('x402 outbound requests (contract §13: the webhook URL rules)', () => {
    let pki: TestPki;
    let target: Awaited<ReturnType<typeof startTarget>>;
    let fetchUpstream: ReturnType<typeof createUpstreamFetcher>;
    before(async () => {
      pki = await createTestPki();
      target = await startTarget(pki);
      fetchUpstream = createUpstreamFetcher({ allowLoopback: true, ca: pki.ca, resolver: noDns });
      target.routes.set('/redirect', (_req, res) => {
        res.writeHead(302, { location: target.url('/redirect-target') });
        res.end();
      });
      target.routes.set('/slow-headers', (_req, res) => void target.held.push(res));
      target.routes.set('/trickle', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{');
        target.held.push(res);
      });
      const bomb = gzipSync(Buffer.alloc(20 * 1024 * 1024));
      target.routes.set('/gzip', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': String(bomb.length) });
        res.end(bomb);
      });
      target.routes.set('/huge', (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(Buffer.alloc(2 * 1024 * 1024, 'x'));
      });
    });
    after(() => target.close());

    it('never follows a redirect: the 3xx comes back and its Location is never fetched', async () => {
      const res = await fetchUpstream({ url: target.url('/redirect'), method: 'GET', timeoutMs: 5000 });
      expect(res.status).to.equal(302);
      expect(res.headers.location).to.equal(target.url('/redirect-target'));
      expect(target.requests.filter((r) => r.path === '/redirect-target')).to.have.length(0);
    });

    it('times out slow headers and a body trickled after 2xx headers within one deadline', async () => {
      for (const path of ['/slow-headers', '/trickle']) {
        const started = Date.now();
        const err = await failure(fetchUpstream({ url: target.url(path), method: 'GET', timeoutMs: 300 }));
        expect(err, path).to.be.instanceOf(ApiError);
        expect((err as ApiError).code).to.equal('upstream_error');
        expect((err as ApiError).details).to.include({ reason: 'timeout' });
        expect(Date.now() - started, path).to.be.below(5000);
      }
    });

    it('asks for identity encoding, never inflates a gzip bomb and caps the body', async () => {
      const gz = await fetchUpstream({ url: target.url('/gzip'), method: 'GET', timeoutMs: 5000 });
      expect(target.requests.find((r) => r.path === '/gzip')?.headers['accept-encoding']).to.equal('identity');
      expect(gz.body.length).to.be.at.most(MAX_UPSTREAM_BODY_BYTES);
      const huge = await fetchUpstream({ url: target.url('/huge'), method: 'GET', timeoutMs: 5000 });
      expect(huge.truncated).to.equal(true);
      expect(huge.body.length).to.equal(MAX_UPSTREAM_BODY_BYTES);
    });

    it('refuses private targets, names resolving to any non-public address, and loopback names even with the flag', async () => {
      const mixed = createUpstreamFetcher({ allowLoopback: true, ca: pki.ca, resolver: table({ 'mixed.example.com': [v4('8.8.8.8'), v4('127.0.0.1')], 'loop.example.com': [v4('127.0.0.1')] }) });
      for (const url of [
        `https://mixed.example.com:${target.port}/x402-private`,
        `https://loop.example.com:${target.port}/x402-private`,
        'https://10.0.0.1/x402-private',
        'https://169.254.169.254/latest',
        'https://127.0.0.1.nip.io/x402-private',
        `http://127.0.0.1:${target.port}/x402-private`,
      ]) {
        const err = await failure(mixed({ url, method: 'GET', timeoutMs: 2000 }));
        expect(err, url).to.be.instanceOf(ApiError);
        expect((err as ApiError).code, url).to.equal('validation_failed');
      }
      expect(target.requests.filter((r) => r.path === '/x402-private')).to.have.length(0);
    });

    it('answers upstream_error (not validation_failed) when a public name does not resolve', async () => {
      const err = await failure(fetchUpstream({ url: 'https://seller.example.com/x', method: 'GET', timeoutMs: 2000 }));
      expect(err).to.be.instanceOf(ApiError);
      expect((err as ApiError).code).to.equal('upstream_error');
      expect(err).not.to.be.instanceOf(DnsResolutionError);
    });
  });
});
