// A TCP proxy on loopback that can fail like a network or a server: refuse, reset or silently drop
// (blackhole). Put it between the app and Postgres or Redis to simulate outages without touching
// the shared servers. Reusable by tests and by operator soak scripts.
import net, { type AddressInfo } from 'node:net';

/**
 * - `pass`: forward bytes both ways.
 * - `refuse`: stop listening (new connects get ECONNREFUSED) and reset every open connection, as a stopped server does.
 * - `reset`: keep listening but reset new and open connections at once (RST).
 * - `blackhole`: accept connections and hold every byte in both directions, answering nothing, as a
 *   partition does; when the mode returns to `pass` the held bytes are delivered (TCP retransmission).
 */
export type ProxyMode = 'pass' | 'refuse' | 'reset' | 'blackhole';

export interface TcpProxy {
  /** The port the proxy listens on (stable across `refuse` and back). */
  port: number;
  mode(): ProxyMode;
  setMode(mode: ProxyMode): Promise<void>;
  /** Open client connections right now. */
  connections(): number;
  /** `url` with its host and port replaced by the proxy's (e.g. a DATABASE_URL). */
  rewrite(url: string): string;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Bytes held while blackholed, per direction, delivered on `pass`. */
  heldUp: Buffer[];
  heldDown: Buffer[];
}

export async function startTcpProxy(target: { host: string; port: number }, opts: { host?: string; port?: number } = {}): Promise<TcpProxy> {
  const host = opts.host ?? '127.0.0.1';
  let current: ProxyMode = 'pass';
  const pairs = new Set<Pair>();

  const kill = (pair: Pair) => {
    pair.client.resetAndDestroy();
    pair.upstream.destroy();
    pairs.delete(pair);
  };

  const server = net.createServer((client) => {
    if (current === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const pair: Pair = { client, upstream, heldUp: [], heldDown: [] };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      if (current === 'blackhole') pair.heldUp.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (current === 'blackhole') pair.heldDown.push(chunk);
      else client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    client.on('close', end);
    upstream.on('error', end);
    upstream.on('close', end);
  });

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(opts.port ?? 0);
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    mode: () => current,
    connections: () => pairs.size,
    rewrite(url) {
      const u = new URL(url);
      u.hostname = host;
      u.port = String(port);
      return u.toString();
    },
    async setMode(mode) {
      const previous = current;
      current = mode;
      if (mode === 'refuse' || mode === 'reset') for (const pair of [...pairs]) kill(pair);
      if (mode === 'refuse' && server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
      if (mode !== 'refuse' && !server.listening) await listen(port);
      if (previous === 'blackhole' && mode === 'pass') {
        for (const pair of pairs) {
          for (const chunk of pair.heldUp.splice(0)) pair.upstream.write(chunk);
          for (const chunk of pair.heldDown.splice(0)) pair.client.write(chunk);
        }
      }
    },
    async close() {
      for (const pair of [...pairs]) kill(pair);
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
