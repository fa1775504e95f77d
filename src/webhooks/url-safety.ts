// Public-HTTPS URL checks and DNS pinning for outbound requests (webhooks now, x402 later).
//
// Order matters: parse with WHATWG URL (it normalises decimal/hex/octal IPv4 and IDNA), check the
// parsed host, resolve every address, refuse if ANY is non-public, then connect only to that set
// (a pinned `lookup`), so a rebinding answer between check and connect cannot reach a private host.
import { lookup as dnsLookup } from 'node:dns/promises';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address; must reject (fail closed) on any problem. */
export type Resolver = (hostname: string, signal?: AbortSignal) => Promise<ResolvedAddress[]>;

export interface UrlSafetyOptions {
  /** Development/test only: 127.0.0.0/8 and ::1 IP literals pass. Names such as `localhost` never do. */
  allowLoopback?: boolean;
  resolver?: Resolver;
  signal?: AbortSignal;
}

export interface SafeTarget {
  url: URL;
  /** Host name without brackets or trailing dot; SNI and certificate checks use it. */
  hostname: string;
  port: number;
  addresses: ResolvedAddress[];
}

/**
 * The URL itself is unacceptable (scheme, userinfo, private address...): terminal, never retried.
 * `reason` may be shown to the caller: it never names an address the caller did not write itself, so
 * refusals cannot map internal names. `detail` (resolved addresses) is for the server log only.
 */
export class UrlRejectedError extends Error {
  constructor(
    readonly reason: string,
    readonly detail: string = reason,
  ) {
    super(`url rejected: ${reason}`);
    this.name = 'UrlRejectedError';
  }
}

/** What a caller is told when a name resolves to a non-public address (the address goes to the log). */
export const NOT_PUBLIC_REASON = 'the host name resolves to an address that is not public';
/** What a caller is told when a name does not resolve (the name and the resolver error go to the log). */
export const NOT_REACHABLE_REASON = 'the host is not reachable';

/** The name could not be resolved (NXDOMAIN, timeout): a network error, retryable at delivery. */
export class DnsResolutionError extends Error {
  constructor(
    readonly hostname: string,
    cause?: unknown,
  ) {
    super(NOT_REACHABLE_REASON, { cause });
    this.name = 'DnsResolutionError';
  }

  /** For the server log: the name and why it did not resolve. */
  get detail(): string {
    const cause = this.cause instanceof Error ? `: ${this.cause.message}` : '';
    return `could not resolve ${this.hostname}${cause}`;
  }
}

export const DNS_TIMEOUT_MS = 2_000;

/** node:dns with a short timeout; fails closed (an empty or slow answer is an error). */
export function createSystemResolver(timeoutMs = DNS_TIMEOUT_MS): Resolver {
  return async (hostname, signal) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const answer = dnsLookup(hostname, { all: true, order: 'verbatim' });
    answer.catch(() => undefined);
    const aborted = new Promise<never>((_, reject) => {
      if (combined.aborted) reject(combined.reason);
      combined.addEventListener('abort', () => reject(combined.reason), { once: true });
    });
    const addresses = await Promise.race([answer, aborted]);
    if (addresses.length === 0) throw new Error('empty answer');
    return addresses.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  };
}

// ---------------------------------------------------------------------------------------------
// Address classification

const V4_DENIED: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches local services on Linux
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT (Tailscale, cloud internals, Alibaba metadata 100.100.100.200)
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, AWS/GCP/Azure IMDS 169.254.169.254, ECS 169.254.170.2
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved + broadcast
  ['168.63.129.16', 32], // Azure WireServer: looks public, is metadata
];

const V6_DENIED: Array<[string, number]> = [
  ['2001::', 23], // IETF protocol assignments: Teredo 2001::/32, ORCHID, benchmarking 2001:2::/48
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 embeds an IPv4 target
  ['3fff::', 20], // documentation (RFC 9637)
];

function parseV4(address: string): number | null {
  const parts = address.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^[0-9]{1,3}$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    value = value * 256 + n;
  }
  return value;
}

/** Parses an IPv6 literal (no zone id) into a 128-bit bigint, or null. */
function parseV6(address: string): bigint | null {
  if (address.includes('%')) return null;
  let text = address;
  // Trailing dotted IPv4 (::ffff:1.2.3.4, ::1.2.3.4).
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseV4(tail);
    if (v4 === null) return null;
    text = `${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const rest = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? head.length !== 8 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...rest];
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(group)) return null;
    value = (value << 16n) | BigInt(parseInt(group, 16));
  }
  return value;
}

const inV4 = (value: number, [base, bits]: [string, number]): boolean => {
  const start = parseV4(base)!;
  const size = 2 ** (32 - bits);
  return value >= start && value < start + size;
};

const inV6 = (value: bigint, [base, bits]: [string, number]): boolean => {
  const shift = BigInt(128 - bits);
  return value >> shift === parseV6(base)! >> shift;
};

function isPublicV4(value: number): boolean {
  return !V4_DENIED.some((range) => inV4(value, range));
}

/**
 * Is this address a public unicast destination? IPv4-mapped (::ffff:0:0/96), IPv4-compatible
 * (::/96) and IPv4-translated (::ffff:0:0:0/96) forms are unwrapped and judged as IPv4. Only
 * global unicast 2000::/3 is accepted for IPv6, which already excludes ::, ::1, fc00::/7 (ULA,
 * incl. AWS fd00:ec2::254), fe80::/10, fec0::/10, ff00::/8, 100::/64, 5f00::/16 and NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48 (refused even when they carry a public IPv4).
 */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) {
    const v4 = parseV4(address);
    return v4 !== null && isPublicV4(v4);
  }
  if (family !== 6) return false;
  const v6 = parseV6(address);
  if (v6 === null) return false;
  const high96 = v6 >> 32n;
  const low32 = Number(v6 & 0xffffffffn);
  if (high96 === 0xffffn || high96 === 0n || high96 === 0xffff0000n) return low32 > 1 && isPublicV4(low32);
  if (!inV6(v6, ['2000::', 3])) return false;
  return !V6_DENIED.some((range) => inV6(v6, range));
}

export function isLoopbackLiteral(address: string): boolean {
  if (isIP(address) === 4) return inV4(parseV4(address)!, ['127.0.0.0', 8]);
  return isIP(address) === 6 && parseV6(address) === 1n;
}

// ---------------------------------------------------------------------------------------------
// Host names

/** Suffixes that never name a public receiver (RFC 6761/6762/8375 and common internal zones). */
const PRIVATE_SUFFIXES = ['localhost', 'local', 'cluster.local', 'svc', 'localdomain', 'internal', 'intranet', 'lan', 'home.arpa', 'invalid', 'test', 'onion', 'corp', 'home'];

/** Public zones whose every name resolves to loopback by design. */
const LOOPBACK_ZONES = ['localtest.me', 'lvh.me', 'vcap.me', 'lacolhost.com', 'localho.st', 'localhost.direct'];

/**
 * A non-public IPv4 address spelled inside a name (`127.0.0.1.nip.io`, `app-10-0-0-1.sslip.io`):
 * wildcard-DNS services answer with it. Refused without asking DNS, so the check holds where DNS
 * is unreachable (creation accepts an unresolvable name; delivery re-checks). The hex form
 * (`0a000001.nip.io`) is left to the resolved-address check: random hex labels would misfire.
 */
function embeddedPrivateV4(hostname: string): string | null {
  const labels = hostname.split('.');
  for (let i = 0; i + 4 <= labels.length; i++) {
    const v4 = parseV4(labels.slice(i, i + 4).join('.'));
    if (v4 !== null && !isPublicV4(v4)) return labels.slice(i, i + 4).join('.');
  }
  for (const label of labels) {
    const dashed = /(?:^|-)([0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3})$/.exec(label)?.[1];
    const v4 = dashed ? parseV4(dashed.replace(/-/g, '.')) : null;
    if (v4 !== null && !isPublicV4(v4)) return label;
  }
  return null;
}

function checkHostName(hostname: string): void {
  if (hostname === '') throw new UrlRejectedError('empty host');
  if (!hostname.includes('.')) throw new UrlRejectedError('single-label host names are not public');
  for (const suffix of PRIVATE_SUFFIXES) {
    if (hostname === suffix || hostname.endsWith(`.${suffix}`)) throw new UrlRejectedError(`host names under .${suffix} are not public`);
  }
  if (!/^[a-z0-9.-]+$/.test(hostname)) throw new UrlRejectedError('host name has characters outside LDH');
  if (hostname.split('.').some((label) => label === '' || label.length > 63)) throw new UrlRejectedError('malformed host name');
  // A numeric final label means the URL parser did not accept it as IPv4: refuse rather than resolve.
  if (/^[0-9]+$/.test(hostname.slice(hostname.lastIndexOf('.') + 1))) throw new UrlRejectedError('numeric top-level label');
  for (const zone of LOOPBACK_ZONES) {
    if (hostname === zone || hostname.endsWith(`.${zone}`)) throw new UrlRejectedError(`names under ${zone} resolve to loopback`);
  }
  const embedded = embeddedPrivateV4(hostname);
  if (embedded) throw new UrlRejectedError(`host name embeds the non-public address ${embedded}`);
}

/**
 * Parses and checks a URL without resolving it (syntax, scheme, userinfo, host rules, literal
 * addresses). Returns the target with the literal's address, or no address for a name.
 */
export function parsePublicHttpsUrl(raw: string, options: Pick<UrlSafetyOptions, 'allowLoopback'> = {}): SafeTarget {
  if (typeof raw !== 'string' || raw.length > 2048) throw new UrlRejectedError('url must be a string of at most 2048 characters');
  if (/[\u0000-\u001f\u007f\s\\]/.test(raw)) throw new UrlRejectedError('url contains whitespace, control characters or backslashes');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlRejectedError('not a valid URL');
  }
  if (url.protocol !== 'https:') throw new UrlRejectedError('only https URLs are accepted');
  if (url.username !== '' || url.password !== '' || /^https:\/\/[^/?#]*@/i.test(raw)) throw new UrlRejectedError('credentials in the URL are not accepted');
  let hostname = url.hostname.toLowerCase();
  if (hostname.startsWith('[') && hostname.endsWith(']')) hostname = hostname.slice(1, -1);
  if (hostname.endsWith('.')) hostname = hostname.slice(0, -1);
  const port = url.port === '' ? 443 : Number(url.port);
  if (port === 0) throw new UrlRejectedError('port 0 is not accepted');

  const family = isIP(hostname);
  if (family !== 0) {
    if (options.allowLoopback && isLoopbackLiteral(hostname)) return { url, hostname, port, addresses: [{ address: hostname, family: family as 4 | 6 }] };
    if (!isPublicAddress(hostname)) throw new UrlRejectedError(`address ${hostname} is not public`);
    return { url, hostname, port, addresses: [{ address: hostname, family: family as 4 | 6 }] };
  }
  checkHostName(hostname);
  return { url, hostname, port, addresses: [] };
}

/**
 * The full check, run at create/PATCH and again before every attempt: parse, resolve every
 * address, refuse if any is not public. Throws UrlRejectedError (terminal) or
 * DnsResolutionError (the name did not resolve).
 */
export async function assertPublicHttpsUrl(raw: string, options: UrlSafetyOptions = {}): Promise<SafeTarget> {
  return resolvePublicTarget(parsePublicHttpsUrl(raw, options), options);
}

/**
 * The second half of assertPublicHttpsUrl, for a target parsePublicHttpsUrl returned: an IP literal was
 * judged by the parse (it cannot change); a name is resolved and every address checked, on every call.
 * A caller may keep the parse of an unchanged URL string (it depends on nothing else) but must call this
 * before every connection, since a DNS answer may change.
 */
export async function resolvePublicTarget(target: SafeTarget, options: UrlSafetyOptions = {}): Promise<SafeTarget> {
  if (target.addresses.length > 0) return target;
  const resolver = options.resolver ?? createSystemResolver();
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolver(target.hostname, options.signal);
  } catch (err) {
    throw new DnsResolutionError(target.hostname, err);
  }
  if (addresses.length === 0) throw new DnsResolutionError(target.hostname);
  for (const { address } of addresses) {
    // Names never get the loopback exemption: it covers IP literals only.
    if (!isPublicAddress(address)) throw new UrlRejectedError(NOT_PUBLIC_REASON, `${target.hostname} resolves to non-public address ${address}`);
  }
  return { ...target, addresses };
}

// ---------------------------------------------------------------------------------------------
// Pinning

/** A `lookup` that answers only from the validated set, honouring `all` and `family`. */
export function createPinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number | string } | number, callback: (...args: unknown[]) => void) => {
    const opts = typeof options === 'number' ? { family: options } : (options ?? {});
    const wanted = opts.family === 'IPv4' ? 4 : opts.family === 'IPv6' ? 6 : Number(opts.family ?? 0);
    const set = wanted === 4 || wanted === 6 ? addresses.filter((a) => a.family === wanted) : [...addresses];
    if (set.length === 0) {
      const err = Object.assign(new Error(`no validated address for ${hostname}`), { code: 'ENOTFOUND' });
      return process.nextTick(callback, err);
    }
    if (opts.all)
      return process.nextTick(
        callback,
        null,
        set.map((a) => ({ address: a.address, family: a.family })),
      );
    return process.nextTick(callback, null, set[0]!.address, set[0]!.family);
  }) as LookupFunction;
}

export interface PinnedAgentOptions {
  addresses: readonly ResolvedAddress[];
  /** Extra trusted CAs (tests); production trusts NODE_EXTRA_CA_CERTS through Node's defaults. */
  ca?: string | Buffer | Array<string | Buffer>;
  keepAlive?: boolean;
}

/** An https.Agent whose sockets can only reach the validated addresses; SNI stays the host name. */
export function createPinnedAgent(options: PinnedAgentOptions): https.Agent {
  return new https.Agent({
    lookup: createPinnedLookup(options.addresses),
    keepAlive: options.keepAlive ?? false,
    maxSockets: 32,
    ...(options.ca ? { ca: options.ca } : {}),
  });
}
