// Ids (src/lib/ids.ts): time-ordered UUIDs (version 7), so rows written in turn land at the right edge of an index.
import { expect } from 'chai';
import { isUuid, newId } from '../../src/lib/ids.js';

describe('newId', () => {
  it('makes RFC 9562 version 7 UUIDs carrying the current millisecond', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    expect(isUuid(id)).to.equal(true);
    expect(id[14], 'version').to.equal('7');
    expect(['8', '9', 'a', 'b'], 'variant').to.include(id[19]);
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).to.be.within(before, after);
  });

  it('sorts ids made in later milliseconds after earlier ones, and never repeats one', async () => {
    const first = Array.from({ length: 1000 }, newId);
    await new Promise((resolve) => setTimeout(resolve, 3));
    const later = newId();
    expect(first.every((id) => id < later)).to.equal(true);
    expect(new Set([...first, later]).size).to.equal(1001);
  });
});
