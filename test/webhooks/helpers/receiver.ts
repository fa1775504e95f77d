// A real HTTPS webhook receiver on loopback with its own CA (selfsigned), recording every request.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generate } from 'selfsigned';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  rawBody: Buffer;
  at: number;
}

export type ReceiverHandler = (req: ReceivedRequest, res: ServerResponse) => void | Promise<void>;

export interface Receiver {
  port: number;
  ca: string;
  requests: ReceivedRequest[];
  url(path?: string): string;
  /** Replace how requests are answered (default: 200 "ok"). */
  handle(handler: ReceiverHandler): void;
  waitForRequests(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export interface TestPki {
  ca: string;
  key: string;
  cert: string;
}

/** A CA and a leaf for 127.0.0.1, ::1 and hooks.example.com, signed by that CA. */
export async function createTestPki(): Promise<TestPki> {
  const notBeforeDate = new Date(Date.now() - 24 * 3600_000);
  const notAfterDate = new Date(Date.now() + 30 * 24 * 3600_000);
  const ca = await generate([{ name: 'commonName', value: 'Webhook Test CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const leaf = await generate([{ name: 'commonName', value: 'hooks.example.com' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
          { type: 2, value: 'hooks.example.com' },
        ],
      },
    ],
  });
  return { ca: ca.cert, key: leaf.private, cert: leaf.cert };
}

export async function startReceiver(pki: TestPki): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let handler: ReceiverHandler = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  };
  const waiters: Array<() => void> = [];
  const server: Server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, rawBody: Buffer.concat(chunks), at: Date.now() };
      requests.push(received);
      for (const w of waiters.splice(0)) w();
      Promise.resolve(handler(received, res)).catch(() => res.destroy());
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    ca: pki.ca,
    requests,
    url: (path = '/hook') => `https://127.0.0.1:${port}${path}`,
    handle(next) {
      handler = next;
    },
    async waitForRequests(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < count) {
        if (Date.now() > deadline) throw new Error(`receiver got ${requests.length} of ${count} requests`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return requests;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
