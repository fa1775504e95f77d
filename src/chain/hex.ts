// The chain's primitive value types, below the port and its adapters (which import each other's types otherwise).
export type Hex = `0x${string}`;
export type Address = `0x${string}`;
