// /healthz (process up) and /readyz (Postgres and Redis reachable, plus the chain's state); outside the API envelope.
import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { ChainHealth } from '../chain/port.js';

export function createHealthHandlers(deps: { db: Knex; pingRedis: (() => Promise<unknown>) | null; chainHealth?: (() => Promise<ChainHealth>) | null }) {
  return {
    healthz(_req: Request, res: Response) {
      res.status(200).json({ status: 'ok' });
    },
    async readyz(_req: Request, res: Response) {
      const timeout = <T>(p: Promise<T>) => {
        let timer: NodeJS.Timeout | undefined;
        const expiry = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), 2000);
        });
        return Promise.race([p, expiry]).finally(() => clearTimeout(timer));
      };
      const checks: Record<string, 'ok' | 'down'> = {};
      checks.database = await timeout(deps.db.raw('SELECT 1')).then(() => 'ok' as const, () => 'down' as const);
      if (deps.pingRedis) checks.redis = await timeout(deps.pingRedis()).then(() => 'ok' as const, () => 'down' as const);
      const ready = Object.values(checks).every((v) => v === 'ok');
      // Reported, not gating: with the node down, writes are still accepted (holds placed) and settle when it returns.
      const body: Record<string, unknown> = { status: ready ? 'ready' : 'unavailable', checks };
      if (deps.chainHealth) body.chain = await timeout(deps.chainHealth()).catch((err: unknown) => ({ mode: 'evm', state: 'unreachable', error: err instanceof Error ? err.message : String(err) }));
      res.status(ready ? 200 : 503).json(body);
    },
  };
}
