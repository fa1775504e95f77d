// An EIP-712 proposal as the service sends it (`owner_signature_required`: typed data with integers as decimal
// strings, `EIP712Domain` listed) turned back into what viem signs and hashes. Pure: the CLI and the console share it.
import type { TypedDataDefinition } from 'viem';

/** The typed data of a proposal as viem signs it: integers back to bigint, field by field as its types say. */
export function typedDataOf(json: Record<string, unknown>): TypedDataDefinition {
  const types = json.types as Record<string, { name: string; type: string }[]>;
  const convert = (type: string, value: unknown): unknown => {
    if (type.endsWith('[]')) return (value as unknown[]).map((v) => convert(type.slice(0, -2), v));
    if (/^u?int\d*$/.test(type)) return BigInt(value as string);
    const fields = types[type];
    if (!fields) return value;
    const obj = value as Record<string, unknown>;
    return Object.fromEntries(fields.map((f) => [f.name, convert(f.type, obj[f.name])]));
  };
  const primaryType = String(json.primaryType);
  const { EIP712Domain: _domain, ...messageTypes } = types;
  const domain = json.domain as Record<string, unknown>;
  return {
    domain: { ...domain, chainId: Number(domain.chainId) },
    types: messageTypes,
    primaryType,
    message: convert(primaryType, json.message) as Record<string, unknown>,
  } as unknown as TypedDataDefinition;
}
