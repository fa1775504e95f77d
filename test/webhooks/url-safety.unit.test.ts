// URL safety: the hostile table, address classification, loopback exemption and pinned lookups.
import { expect } from 'chai';
import { assertPublicHttpsUrl, createPinnedLookup, createSystemResolver, DnsResolutionError, isPublicAddress, UrlRejectedError } from '../../src/webhooks/url-safety.js';
import { createTableResolver, HOSTILE_URLS } from './hostile-urls.js';

describe('webhook url safety', () => {
  const resolver = createTableResolver();

  it('has a hostile table of at least 60 entries', () => {
    expect(new Set(HOSTILE_URLS).size).to.be.at.least(60);
  });

  for (const url of HOSTILE_URLS) {
    it(`refuses ${JSON.stringify(url)}`, async () => {
      let error: unknown;
      try {
        await assertPublicHttpsUrl(url, { resolver });
      } catch (err) {
        error = err;
      }
      expect(error, url).to.satisfy((e: unknown) => e instanceof UrlRejectedError || e instanceof DnsResolutionError);
    });
  }

  it('accepts a public name whose every address is public and returns them for pinning', async () => {
    const target = await assertPublicHttpsUrl('https://hooks.example.com:8443/path?q=1', { resolver });
    expect(target.hostname).to.equal('hooks.example.com');
    expect(target.port).to.equal(8443);
    expect(target.addresses.map((a) => a.address)).to.deep.equal(['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);
  });

  it('accepts public IP literals, boundary cases included', async () => {
    for (const url of ['https://8.8.8.8/', 'https://100.63.255.254/', 'https://100.128.0.1/', 'https://[2606:4700::1111]/', 'https://[::ffff:8.8.8.8]/']) {
      const target = await assertPublicHttpsUrl(url, {
        resolver: async () => {
          throw new Error('must not resolve literals');
        },
      });
      expect(target.addresses).to.have.length(1);
    }
  });

  it('classifies addresses like the Smokescreen table', () => {
    expect(isPublicAddress('100.63.255.254')).to.equal(true);
    expect(isPublicAddress('100.64.0.1')).to.equal(false);
    expect(isPublicAddress('100.128.0.1')).to.equal(true);
    expect(isPublicAddress('64:ff9b::808:808')).to.equal(false); // NAT64 carrying a public v4
    expect(isPublicAddress('64:ff9c::1')).to.equal(false); // outside 2000::/3
    expect(isPublicAddress('2002:0808:0808::1')).to.equal(false); // 6to4, even of a public v4
    expect(isPublicAddress('::ffff:10.0.0.1')).to.equal(false);
    expect(isPublicAddress('::ffff:0:10.0.0.1')).to.equal(false);
    expect(isPublicAddress('172.15.255.255')).to.equal(true);
    expect(isPublicAddress('172.32.0.0')).to.equal(true);
    expect(isPublicAddress('not-an-ip')).to.equal(false);
  });

  it('lets loopback IP literals through only with allowLoopback, and never the name localhost', async () => {
    const target = await assertPublicHttpsUrl('https://127.0.0.1:9443/hook', { allowLoopback: true });
    expect(target.addresses).to.deep.equal([{ address: '127.0.0.1', family: 4 }]);
    await assertPublicHttpsUrl('https://[::1]:9443/hook', { allowLoopback: true });
    for (const url of ['https://localhost/hook', 'https://127.0.0.1.nip.io/hook', 'https://10.0.0.1/hook', 'http://127.0.0.1/hook', 'https://[::ffff:127.0.0.1]/']) {
      let error: unknown;
      try {
        await assertPublicHttpsUrl(url, { allowLoopback: true, resolver });
      } catch (err) {
        error = err;
      }
      expect(error, url).to.be.instanceOf(UrlRejectedError);
    }
  });

  it('fails closed when the resolver is slow', async () => {
    const slow = createSystemResolver(50);
    const started = Date.now();
    let error: unknown;
    try {
      // .invalid never resolves; the name is refused before DNS, so resolve a plausible name through the slow path.
      await slow('does-not-exist.example.invalid');
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(Error);
    expect(Date.now() - started).to.be.below(2000);
  });

  it('answers lookups only from the pinned set, honouring all and family', async () => {
    const lookup = createPinnedLookup([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800::1', family: 6 },
    ]);
    const all = await new Promise<unknown>((resolve, reject) => lookup('evil.example', { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));
    expect(all).to.deep.equal([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800::1', family: 6 },
    ]);
    const one = await new Promise<unknown>((resolve, reject) => lookup('evil.example', { family: 6 }, (err, address) => (err ? reject(err) : resolve(address))));
    expect(one).to.equal('2606:2800::1');
  });
});
