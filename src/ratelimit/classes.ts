// Rate-limit classes (the document's RateClass) and their defaults (spec part 8).
import { RATE_CLASSES } from '../../generated/vocabulary.js';

export { RATE_CLASSES };
export type RateClass = (typeof RATE_CLASSES)[number];

export interface RateRule {
  limit: number;
  burst: number;
  windowSeconds: number;
}

export const DEFAULT_RULES: Record<RateClass, RateRule> = {
  read: { limit: 600, burst: 100, windowSeconds: 60 },
  write: { limit: 60, burst: 20, windowSeconds: 60 },
  simulate: { limit: 120, burst: 30, windowSeconds: 60 },
  webhook_management: { limit: 10, burst: 5, windowSeconds: 60 },
  bulk_write: { limit: 20, burst: 5, windowSeconds: 60 },
};

/** Failed authentications per client address (contract §15). */
export const AUTH_FAILURE_RULE: RateRule = { limit: 60, burst: 60, windowSeconds: 60 };
/** Public routes (openapi.json) per client address. */
export const PUBLIC_RULE: RateRule = { limit: 600, burst: 100, windowSeconds: 60 };
