// Amounts and ids for people: thousands separators, USD, and ids told apart by their random tail (time-ordered
// UUIDs share their first characters).
export function amount(value: string | null | undefined, symbol?: string | null): string {
  if (value === null || value === undefined) return '—';
  const [whole, frac = ''] = value.split('.');
  const grouped = (whole ?? '0').replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const shown = frac.replace(/0+$/, '').slice(0, 6);
  return `${grouped}${shown ? `.${shown}` : ''}${symbol ? ` ${symbol}` : ''}`;
}

/** "$12,540.50": dollars grouped, always with cents. */
export function usd(value: string | null | undefined): string {
  if (value === null || value === undefined) return '—';
  const [whole = '0', cents = '00'] = Number(value).toFixed(2).split('.');
  return `$${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${cents}`;
}

/** The id's random tail (its last 12 hex digits), which differs between ids made in the same millisecond. */
export const shortId = (id: string): string => `…${id.slice(-12)}`;

/** "in 3 h 20 min", "in 45 s", "expired". */
export function until(iso: string, now = Date.now()): string {
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  if (s <= 0) return 'expired';
  if (s < 60) return `in ${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `in ${m} min`;
  const h = Math.floor(m / 60);
  return `in ${h} h ${m % 60} min`;
}
