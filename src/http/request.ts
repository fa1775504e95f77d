// Readers of an Express request shared by the API entries, the console and the OAuth wiring.
import type { Request } from 'express';

export function header(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Client address for per-address limits; X-Forwarded-For only when TRUST_PROXY is set (Express `trust proxy`). */
export const clientAddress = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';
