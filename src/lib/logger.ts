// Structured logging (pino); the logger is built once in the composition root and passed down.
import { format } from 'node:util';
import { pino, type Logger } from 'pino';

export type { Logger };

/** `ids` (the tracing's current span, when tracing is on) adds `traceId` and `spanId` to every line written inside a span. */
export function createLogger(level: string, ids?: () => { traceId: string; spanId: string } | undefined): Logger {
  return pino({ level, base: undefined, redact: ['req.headers["x-api-key"]', 'req.headers.authorization'], ...(ids ? { mixin: () => ids() ?? {} } : {}) });
}

/**
 * Sends libraries' console output (oidc-provider's notices, the MCP SDK's warnings) through the
 * logger, so every line the process writes is JSON. Process entry points call it; tests do not.
 */
export function routeConsoleTo(log: Logger): void {
  /* eslint-disable no-console -- replacing console is this function's job */
  const child = log.child({ component: 'console' });
  console.log = (...args: unknown[]) => child.info(format(...args));
  console.info = (...args: unknown[]) => child.info(format(...args));
  console.warn = (...args: unknown[]) => child.warn(format(...args));
  console.error = (...args: unknown[]) => child.error(format(...args));
  console.debug = (...args: unknown[]) => child.debug(format(...args));
  /* eslint-enable no-console */
}

/** One JSON line in pino's shape, for the moments before a logger exists (configuration refused, a fatal start-up error). */
export function writeFatalLine(msg: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ level: 60, time: Date.now(), ...fields, msg })}\n`);
}
