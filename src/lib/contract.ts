// The document's named schemas as types, for code below the HTTP layer (services must not import src/http/).
import type { components } from '../../generated/api.js';

/** A named schema of the document (`#/components/schemas/<N>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];
