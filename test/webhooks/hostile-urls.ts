// Hostile webhook URLs (research/webhooks.md §5) and a resolver answering for the attacker-controlled names among them.
import type { ResolvedAddress, Resolver } from '../../src/webhooks/url-safety.js';

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });

/** Public names whose DNS answers are private (or mixed): only the resolved-address check catches them. */
export const HOSTILE_DNS: Record<string, ResolvedAddress[]> = {
  '127.0.0.1.nip.io': [v4('127.0.0.1')],
  'localtest.me': [v4('127.0.0.1')],
  '169-254-169-254.nip.io': [v4('169.254.169.254')],
  'internal-ten.example.com': [v4('10.1.2.3')],
  'mixed.example.com': [v4('93.184.216.34'), v4('192.168.1.10')],
  'mixed6.example.com': [v4('93.184.216.34'), v6('fd00::1')],
  'mapped.example.com': [v6('::ffff:127.0.0.1')],
  'nat64.example.com': [v6('64:ff9b::a9fe:a9fe')],
  'teredo.example.com': [v6('2001:0:4136:e378:8000:63bf:3fff:fdd2')],
  'sixtofour.example.com': [v6('2002:7f00:1::1')],
  'cgnat.example.com': [v4('100.100.100.200')],
  'azure-wire.example.com': [v4('168.63.129.16')],
  'linklocal6.example.com': [v6('fe80::1')],
  'zero.example.com': [v4('0.0.0.0')],
  'multicast.example.com': [v4('239.1.1.1')],
  'docs6.example.com': [v6('2001:db8::1')],
};

export const PUBLIC_DNS: Record<string, ResolvedAddress[]> = {
  'hooks.example.com': [v4('93.184.216.34'), v6('2606:2800:220:1:248:1893:25c8:1946')],
  'partner.example.org': [v4('8.8.8.8')],
};

export function createTableResolver(table: Record<string, ResolvedAddress[]> = { ...HOSTILE_DNS, ...PUBLIC_DNS }): Resolver {
  return async (hostname) => {
    const answer = table[hostname];
    if (!answer) throw Object.assign(new Error(`NXDOMAIN ${hostname}`), { code: 'ENOTFOUND' });
    return answer;
  };
}

export const HOSTILE_URLS: string[] = [
  // schemes
  'http://hooks.example.com/hook',
  'ftp://hooks.example.com/hook',
  'file:///etc/passwd',
  'gopher://hooks.example.com:70/_x',
  'data:text/plain,hello',
  'ws://hooks.example.com/socket',
  'wss://hooks.example.com/socket',
  'javascript:alert(1)',
  'not a url',
  '',
  // loopback in every spelling
  'https://127.0.0.1/hook',
  'https://127.1/hook',
  'https://2130706433/hook',
  'https://0x7f000001/hook',
  'https://0177.0.0.1/hook',
  'https://0x7f.1/hook',
  'https://127.000.000.001/hook',
  'https://%31%32%37.0.0.1/hook',
  'https://\uff11\uff12\uff17.\uff10.\uff10.\uff11/hook',
  'https://127.0.0.1./hook',
  'https://0.0.0.0/hook',
  'https://0/hook',
  'https://[::1]/hook',
  'https://[::]/hook',
  'https://[0:0:0:0:0:0:0:1]/hook',
  'https://[::ffff:127.0.0.1]/hook',
  'https://[::ffff:7f00:1]/hook',
  'https://[::127.0.0.1]/hook',
  // embedded IPv4 (NAT64, 6to4, Teredo)
  'https://[64:ff9b::a9fe:a9fe]/hook',
  'https://[64:ff9b::808:808]/hook',
  'https://[64:ff9b:1::1]/hook',
  'https://[2002:7f00:1::]/hook',
  'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook',
  // metadata
  'https://169.254.169.254/latest/meta-data/',
  'https://169.254.170.2/v2/credentials',
  'https://[fd00:ec2::254]/latest',
  'https://100.100.100.200/latest/meta-data',
  'https://168.63.129.16/machine',
  'https://metadata.google.internal/computeMetadata/v1/',
  // private, CGNAT, link-local, ULA, site-local
  'https://10.0.0.1/hook',
  'https://172.16.5.4/hook',
  'https://172.31.255.255/hook',
  'https://192.168.0.1/hook',
  'https://100.64.0.1/hook',
  'https://169.254.1.1/hook',
  'https://[fe80::1]/hook',
  'https://[fec0::1]/hook',
  'https://[fc00::1]/hook',
  'https://[fd7a:115c:a1e0::1]/hook',
  // reserved, documentation, benchmark, multicast, broadcast
  'https://192.0.0.8/hook',
  'https://192.0.2.10/hook',
  'https://198.51.100.7/hook',
  'https://203.0.113.9/hook',
  'https://198.18.0.1/hook',
  'https://240.0.0.1/hook',
  'https://255.255.255.255/hook',
  'https://224.0.0.1/hook',
  'https://[ff02::1]/hook',
  'https://[2001:db8::1]/hook',
  'https://[3fff::1]/hook',
  'https://[100::1]/hook',
  'https://[5f00::1]/hook',
  // names that are local by definition
  'https://localhost/hook',
  'https://LOCALHOST./hook',
  'https://localhost./hook',
  'https://x.localhost/hook',
  'https://redis/hook',
  'https://db.internal/hook',
  'https://svc.cluster.local/hook',
  'https://printer.local/hook',
  'https://router.home.arpa/hook',
  // credentials and parser confusion
  'https://user:pass@hooks.example.com/hook',
  'https://evil.com@127.0.0.1/hook',
  'https://127.0.0.1#@hooks.example.com/hook',
  'https://127.0.0.1\\@hooks.example.com/hook',
  'https://@hooks.example.com/hook',
  'https://[fe80::1%25eth0]/hook',
  // public names resolving to private addresses (checked after resolution)
  ...Object.keys(HOSTILE_DNS).map((name) => `https://${name}/hook`),
  // names that do not resolve at all: fail closed
  'https://nxdomain.example.net/hook',
];
