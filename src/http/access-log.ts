// One access line per request, whatever answered it (the /v1/agent pipeline, OAuth, connect, MCP,
// health, the 404 fallback), written when the response closes and carrying its request id.
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../lib/logger.js';

interface AccessLocals {
  requestId?: string;
  startedAt?: bigint;
  /** Set by the /v1/agent pipeline once known. */
  agentId?: string;
  op?: { operationId: string };
}

/** Mount right after `requestIdMiddleware`. The query string is left out: it can carry codes and tokens. */
export function createAccessLog(log: Logger) {
  return function accessLog(req: Request, res: Response, next: NextFunction): void {
    // Below `info` the line would be dropped: no listener, no line built (the level is fixed at start).
    if (!log.isLevelEnabled('info')) return next();
    const started = process.hrtime.bigint();
    res.once('close', () => {
      const l = res.locals as AccessLocals;
      const latencyMs = Math.round(Number(process.hrtime.bigint() - (l.startedAt ?? started)) / 1e4) / 100;
      log.info(
        {
          requestId: l.requestId,
          method: req.method,
          path: req.originalUrl.split('?')[0],
          route: l.op?.operationId,
          agentId: l.agentId,
          status: res.statusCode,
          // The client went away before the response was complete.
          ...(res.writableFinished ? {} : { aborted: true }),
          latencyMs,
        },
        'request',
      );
    });
    next();
  };
}
