// Identifiers and opaque tokens.
import { randomBytes, randomUUID } from 'node:crypto';

export const newId = (): string => randomUUID();

export const newWalletId = (): string => `wal_${randomBytes(12).toString('hex')}`;

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID_PATTERN.test(value);
