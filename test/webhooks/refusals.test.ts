// Refusals of webhook and x402 targets name no resolved address and no resolver result (issue 10 item 8):
// the caller learns only that the address is not public or not reachable; the detail goes to the server log.
import { expect } from 'chai';
import { pino } from 'pino';
import type { SeenRefusal } from '../support/refusals.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { parsePublicHttpsUrl, UrlRejectedError, type Resolver } from '../../src/webhooks/url-safety.js';
import { createUpstreamFetcher } from '../../src/x402/upstream.js';
import { createWebhookTestContext, TEST_MASTER_KEY, type WebhookTestContext } from './helpers/context.js';
import { refusal } from '../support/refusals.js';

const INTERNAL_IP = '10.23.45.67';
const resolver: Resolver = async (hostname) => {
  if (hostname === 'billing.corp-example.com') return [{ address: INTERNAL_IP, family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

function capturingLog() {
  const lines: string[] = [];
  return { lines, log: pino({ level: 'info', base: undefined }, { write: (line: string) => lines.push(line) }) };
}

const shown = (err: SeenRefusal) => JSON.stringify({ message: err.message, details: err.details });

describe('outbound target refusals', () => {
  let ctx: WebhookTestContext;
  before(async () => {
    ctx = await createWebhookTestContext();
  });
  after(() => ctx.close());

  it('createWebhook says only "not public" when a name resolves to an internal address, and logs the address', async () => {
    const { lines, log } = capturingLog();
    const service = createWebhookService({ clock: createFakeClock(new Date()), sealer: createSealer(TEST_MASTER_KEY), allowLoopback: false, resolver, log });
    const caller = await ctx.newAgent();
    const err = await refusal(service.create(ctx.db, caller, { url: 'https://billing.corp-example.com/hook', event_types: ['payment.executed'] } as never));
    expect(err.code).to.equal('validation_failed');
    expect(shown(err)).to.include('not public');
    expect(shown(err)).not.to.include(INTERNAL_IP);
    expect(lines.join('\n')).to.include(INTERNAL_IP);
  });

  it('x402 quote names neither the resolved address nor the unresolvable name', async () => {
    const { lines, log } = capturingLog();
    const fetchUpstream = createUpstreamFetcher({ allowLoopback: false, resolver, log });
    const privateName = await refusal(fetchUpstream({ url: 'https://billing.corp-example.com/price', method: 'GET', timeoutMs: 2000 }));
    expect(privateName.code).to.equal('validation_failed');
    expect(shown(privateName)).not.to.include(INTERNAL_IP);
    const unknownName = await refusal(fetchUpstream({ url: 'https://ledger.corp-example.com/price', method: 'GET', timeoutMs: 2000 }));
    expect(unknownName.code).to.equal('upstream_error');
    expect(shown(unknownName)).to.include('not reachable');
    expect(shown(unknownName)).not.to.include('ledger.corp-example.com');
    expect(lines.join('\n')).to.include(INTERNAL_IP).and.to.include('ledger.corp-example.com');
  });

  it('refuses the common internal suffixes at create time without asking DNS', async () => {
    for (const host of ['payments.default.svc', 'payments.default.svc.cluster.local', 'metadata.google.internal', 'printer.local', 'nas.lan', 'router.home.arpa']) {
      expect(() => parsePublicHttpsUrl(`https://${host}/hook`), host).to.throw(UrlRejectedError);
      const caller = await ctx.newAgent();
      const err = await refusal(ctx.strictService.create(ctx.db, caller, { url: `https://${host}/hook`, event_types: ['payment.executed'] } as never));
      expect(err.code, host).to.equal('validation_failed');
    }
  });
});
