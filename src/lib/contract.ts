// The document's types for the layers below HTTP: services take and return these shapes.
import type { components } from '../../generated/api.js';

/** A named schema of the document (`#/components/schemas/<N>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];
