// The document's named schemas as types, for services: they take and return the shapes the contract declares
// without importing the HTTP layer.
import type { components } from '../../generated/api.js';

/** A named schema of the document (`#/components/schemas/<N>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];
