// /healthz (process up) and /readyz (every named dependency check passes, and the process is not draining; the
// chain's state is reported beside them); outside the API envelope.
import type { Request, Response } from 'express';
import type { ChainHealth } from '../chain/port.js';

/** One named dependency of readiness (database, redis, chain, ...): resolves when reachable, rejects or hangs when not. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<unknown>;
}

const CHECK_TIMEOUT_MS = 2000;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
  });
  return Promise.race([p, expiry]).finally(() => clearTimeout(timer));
}

export function createHealthHandlers(deps: { checks: ReadinessCheck[]; timeoutMs?: number; chainHealth?: (() => Promise<ChainHealth>) | null }) {
  let draining = false;
  return {
    healthz(_req: Request, res: Response) {
      res.status(200).json({ status: 'ok' });
    },
    async readyz(_req: Request, res: Response) {
      // Run concurrently: one hanging dependency costs the probe one timeout, not the sum.
      const results = await Promise.all(
        deps.checks.map(async ({ name, check }) => {
          const status = await withTimeout(Promise.resolve().then(check), deps.timeoutMs ?? CHECK_TIMEOUT_MS).then(
            () => 'ok' as const,
            () => 'down' as const,
          );
          return [name, status] as const;
        }),
      );
      const checks = Object.fromEntries(results);
      const allOk = results.every(([, status]) => status === 'ok');
      const status = draining ? 'draining' : allOk ? 'ready' : 'unavailable';
      const body: Record<string, unknown> = { status, checks };
      // Reported, not gating: with the node down, writes are still accepted (holds placed) and settle when it returns.
      if (deps.chainHealth) {
        body.chain = await withTimeout(deps.chainHealth(), deps.timeoutMs ?? CHECK_TIMEOUT_MS).catch((err: unknown) => ({
          mode: 'evm',
          state: 'unreachable',
          error: err instanceof Error ? err.message : String(err),
        }));
      }
      res.status(status === 'ready' ? 200 : 503).json(body);
    },
    /** From now on /readyz answers 503 `draining` (the load balancer stops routing here); /healthz stays 200. */
    startDraining() {
      draining = true;
    },
  };
}
