// The document's types for code outside the HTTP layer: services take and return these, so a shape the
// document does not describe is a compile error there too (src/http/types.ts builds the handler types on them).
import type { components } from '../../generated/api.js';

/** A named schema of the document (`#/components/schemas/<N>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];
