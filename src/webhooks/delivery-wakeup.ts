// What wakes the delivery loop early: a one-shot waker (finished attempts, slots freed) and a LISTEN
// connection on the deliveries channel (a NOTIFY sent in the transaction that wrote the delivery rows).
import pg from 'pg';
import { DELIVERY_CHANNEL } from '../db/repositories/delivery.repository.js';
import type { Logger } from '../lib/logger.js';

export interface Waker {
  wake(): void;
  /**
   * Resolves on `wake` (true), after `ms` or on abort (false); a wake while not waiting is remembered
   * for the next wait.
   */
  wait(ms: number, signal: AbortSignal): Promise<boolean>;
}

export function createWaker(): Waker {
  let pending = false;
  let resolveWait: ((woken: boolean) => void) | null = null;
  return {
    wake() {
      if (resolveWait) resolveWait(true);
      else pending = true;
    },
    wait(ms, signal) {
      if (pending || signal.aborted) {
        const woken = pending;
        pending = false;
        return Promise.resolve(woken);
      }
      return new Promise((resolve) => {
        const done = (woken: boolean) => {
          clearTimeout(timer);
          signal.removeEventListener('abort', aborted);
          resolveWait = null;
          resolve(woken);
        };
        const aborted = () => done(false);
        const timer = setTimeout(done, ms, false);
        signal.addEventListener('abort', aborted, { once: true });
        resolveWait = done;
      });
    },
  };
}

/**
 * Keeps one LISTEN connection open until `signal` aborts, reconnecting after a second when it drops;
 * polling (the loop's idle interval) covers the gaps, and every (re)connection calls `onNotify` once
 * to catch up with what was enqueued while nobody listened.
 */
export function listenForDeliveries(options: { databaseUrl: string; connectTimeoutMs?: number; log: Logger; onNotify: () => void; signal: AbortSignal }): void {
  const { signal, onNotify, log } = options;
  const connect = async () => {
    while (!signal.aborted) {
      // keepAlive: a LISTEN connection is idle for long stretches; a dead peer must still be noticed.
      const client = new pg.Client({ connectionString: options.databaseUrl, connectionTimeoutMillis: options.connectTimeoutMs, keepAlive: true });
      try {
        const ended = new Promise<void>((resolve) => {
          client.on('error', () => resolve());
          client.on('end', () => resolve());
        });
        await client.connect();
        client.on('notification', onNotify);
        await client.query(`LISTEN ${DELIVERY_CHANNEL}`);
        onNotify();
        const stop = () => void client.end().catch(() => undefined);
        signal.addEventListener('abort', stop, { once: true });
        await ended;
        signal.removeEventListener('abort', stop);
      } catch (err) {
        log.warn({ err }, 'webhook LISTEN connection failed; polling meanwhile');
      }
      await client.end().catch(() => undefined);
      if (!signal.aborted) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void connect();
}
