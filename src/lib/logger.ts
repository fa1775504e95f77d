// Structured logging (pino); the logger is built once in the composition root and passed down.
import { pino, type Logger } from 'pino';

export type { Logger };

/** `ids` (the tracing's current span, when tracing is on) adds `traceId` and `spanId` to every line written inside a span. */
export function createLogger(level: string, ids?: () => { traceId: string; spanId: string } | undefined): Logger {
  return pino({ level, base: undefined, redact: ['req.headers["x-api-key"]', 'req.headers.authorization'], ...(ids ? { mixin: () => ids() ?? {} } : {}) });
}
