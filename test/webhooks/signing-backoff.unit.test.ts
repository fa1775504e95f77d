// Signatures (spec 6.5) and the retry schedule (contract §11).
import { expect } from 'chai';
import { nextAttemptAt, parseRetryAfter, RETRY_HORIZON_MS } from '../../src/webhooks/backoff.js';
import { classifyStatus, isRetryable } from '../../src/webhooks/sender.js';
import { computeSignature, generateSigningSecret, signatureHeader, verifyWebhookSignature } from '../../src/webhooks/signing.js';
import { independentVerify } from './helpers/verify.js';

describe('webhook signing', () => {
  const body = '{"id":"e1","type":"webhook.test","z":1,"a":2}';

  it('produces v1=<hex> that an independent HMAC implementation accepts', () => {
    const secret = generateSigningSecret();
    expect(secret).to.match(/^whsec_[A-Za-z0-9_-]{43,}$/);
    const header = signatureHeader([secret], 1_700_000_000, body);
    expect(header).to.match(/^v1=[0-9a-f]{64}$/);
    expect(independentVerify(secret, '1700000000', Buffer.from(body), header)).to.equal(true);
    expect(independentVerify(secret, '1700000001', Buffer.from(body), header)).to.equal(false);
  });

  it('verifyWebhookSignature accepts any listed signature and rejects tampering, skew and junk', () => {
    const current = generateSigningSecret();
    const previous = generateSigningSecret();
    const ts = 1_700_000_000;
    const header = signatureHeader([current, previous], ts, body);
    const base = { rawBody: body, timestampHeader: String(ts), signatureHeader: header, nowSeconds: ts + 10 };
    expect(verifyWebhookSignature({ ...base, secret: current })).to.equal(true);
    expect(verifyWebhookSignature({ ...base, secret: previous })).to.equal(true);
    expect(verifyWebhookSignature({ ...base, secret: generateSigningSecret() })).to.equal(false);
    expect(verifyWebhookSignature({ ...base, secret: current, rawBody: body.replace('"z":1', '"z":2') })).to.equal(false);
    expect(verifyWebhookSignature({ ...base, secret: current, nowSeconds: ts + 301 })).to.equal(false);
    expect(verifyWebhookSignature({ ...base, secret: current, signatureHeader: '' })).to.equal(false);
    expect(verifyWebhookSignature({ ...base, secret: current, signatureHeader: `v1=${computeSignature(current, ts, body).slice(0, 63)}` })).to.equal(false);
  });
});

describe('webhook retry schedule', () => {
  const start = new Date('2026-01-01T00:00:00Z');
  const deadline = new Date(start.getTime() + RETRY_HORIZON_MS);

  it('grows, stays within +/-10 % jitter, and ends exactly at the 72 h deadline', () => {
    let now = start;
    const gaps: number[] = [];
    for (let attempts = 1; attempts < 40; attempts++) {
      const next = nextAttemptAt({ attempts, now, deadline, random: () => 1 });
      if (!next) break;
      gaps.push(next.getTime() - now.getTime());
      now = next;
    }
    expect(gaps[0]).to.equal(11_000);
    for (let i = 1; i < gaps.length - 1; i++) expect(gaps[i]).to.be.at.least(gaps[i - 1]!);
    expect(now.getTime()).to.equal(deadline.getTime());
    expect(nextAttemptAt({ attempts: 99, now, deadline })).to.equal(null);
    expect(gaps.length).to.be.within(10, 14);
    const low = nextAttemptAt({ attempts: 2, now: start, deadline, random: () => 0 })!;
    expect(low.getTime() - start.getTime()).to.equal(54_000);
  });

  it('honours Retry-After up to one hour and within the deadline', () => {
    const next = nextAttemptAt({ attempts: 1, now: start, deadline, retryAfterMs: 120_000, random: () => 0.5 });
    expect(next!.getTime() - start.getTime()).to.equal(120_000);
    const hostile = nextAttemptAt({ attempts: 1, now: start, deadline, retryAfterMs: RETRY_HORIZON_MS * 2 });
    expect(hostile!.getTime() - start.getTime()).to.equal(60 * 60 * 1000);
    const late = new Date(deadline.getTime() - 30 * 60 * 1000);
    const capped = nextAttemptAt({ attempts: 11, now: late, deadline, retryAfterMs: 60 * 60 * 1000 });
    expect(capped!.getTime()).to.equal(deadline.getTime());
  });

  it('parses Retry-After as seconds and as an HTTP date; ignores junk', () => {
    expect(parseRetryAfter('30', start)).to.equal(30_000);
    expect(parseRetryAfter(new Date(start.getTime() + 90_000).toUTCString(), start)).to.equal(90_000);
    expect(parseRetryAfter('soon-ish 12', start)).to.equal(null);
    expect(parseRetryAfter('-5', start)).to.equal(null);
    expect(parseRetryAfter(undefined, start)).to.equal(null);
  });

  it('classifies statuses exactly as spec 3.2', () => {
    expect(classifyStatus(200)).to.equal(null);
    expect(classifyStatus(204)).to.equal(null);
    expect(classifyStatus(301)).to.equal('http_3xx');
    expect(classifyStatus(408)).to.equal('http_408');
    expect(classifyStatus(429)).to.equal('http_429');
    expect(classifyStatus(410)).to.equal('http_4xx');
    expect(classifyStatus(503)).to.equal('http_5xx');
    expect(['http_408', 'http_429', 'http_5xx', 'timeout', 'connect_error', 'dns_error'].every((c) => isRetryable(c as never))).to.equal(true);
    expect(['http_3xx', 'http_4xx', 'tls_error', 'url_rejected', 'payload_too_large'].some((c) => isRetryable(c as never))).to.equal(false);
  });
});
