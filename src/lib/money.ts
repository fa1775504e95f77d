// Money at the edge: decimal strings <-> integer base units (bigint). No `number` ever holds money.

const DECIMAL = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;

/** Parses a non-negative decimal string into base units; refuses more fractional digits than `decimals`. */
export function parseAmount(value: string, decimals: number): bigint {
  const match = DECIMAL.exec(value);
  if (!match) throw new RangeError(`not a decimal amount: ${value}`);
  const whole = match[1]!;
  const fraction = (match[2] ?? '').slice(1);
  if (fraction.length > decimals) throw new RangeError(`more than ${decimals} decimal places: ${value}`);
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, '0') || '0');
}

/** Formats base units as the shortest decimal string (no trailing zeros, no exponent). */
const POWERS_OF_TEN: bigint[] = [];
/** 10^decimals, made once per exponent (lists format several amounts per row). */
export function pow10(decimals: number): bigint {
  return (POWERS_OF_TEN[decimals] ??= 10n ** BigInt(decimals));
}

export function formatAmount(units: bigint, decimals: number): string {
  if (units === 0n) return '0'; // most of a balance list: every asset appears, held or not
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const scale = pow10(decimals);
  const whole = abs / scale;
  const fraction = (abs % scale).toString().padStart(decimals, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/** Division rounding toward zero or away from it; `up` rounds against whoever receives the quotient. */
export function mulDiv(a: bigint, b: bigint, denominator: bigint, rounding: 'down' | 'up' = 'down'): bigint {
  if (denominator === 0n) throw new RangeError('division by zero');
  const product = a * b;
  const quotient = product / denominator;
  if (rounding === 'up' && quotient * denominator !== product) return quotient + 1n;
  return quotient;
}
