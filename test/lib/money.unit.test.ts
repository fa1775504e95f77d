import { expect } from 'chai';
import { formatAmount, mulDiv, parseAmount } from '../../src/lib/money.js';

describe('money', () => {
  it('round-trips 18-decimal amounts above 2^53 base units exactly', () => {
    const value = '123456789012.123456789012345678';
    const units = parseAmount(value, 18);
    expect(units > 2n ** 53n).to.equal(true);
    expect(formatAmount(units, 18)).to.equal(value);
  });
  it('refuses more decimal places than the asset has', () => {
    expect(() => parseAmount('1.1234567', 6)).to.throw(RangeError);
  });
  it('refuses exponents, signs and blanks', () => {
    for (const bad of ['1e6', '-1', '', ' 1', '01', '1.']) expect(() => parseAmount(bad, 6), bad).to.throw(RangeError);
  });
  it('formats without trailing zeros', () => {
    expect(formatAmount(12_500_000n, 6)).to.equal('12.5');
    expect(formatAmount(0n, 6)).to.equal('0');
  });
  it('rounds up only when asked and only when inexact', () => {
    expect(mulDiv(10n, 1n, 3n, 'down')).to.equal(3n);
    expect(mulDiv(10n, 1n, 3n, 'up')).to.equal(4n);
    expect(mulDiv(9n, 1n, 3n, 'up')).to.equal(3n);
  });
});
