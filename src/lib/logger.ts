// Structured logging (pino); the logger is built once in the composition root and passed down.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({ level, base: undefined, redact: ['req.headers["x-api-key"]', 'req.headers.authorization'] });
}
