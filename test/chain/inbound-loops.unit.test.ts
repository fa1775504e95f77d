// The inbound loops' handling of an unreachable node: idle ticks and one warning per outage, other errors untouched.
import { expect } from 'chai';
import { ChainUnavailableError } from '../../src/chain/port.js';
import type { Logger } from '../../src/lib/logger.js';
import { quietWhileDown } from '../../src/services/chain-inbound.js';

describe('inbound chain loops while the node is down', () => {
  it('idles with one warning per outage and notes the recovery; other errors still fail the tick', async () => {
    const seen: Array<[string, string]> = [];
    const log = { warn: (_o: unknown, msg: string) => seen.push(['warn', msg]), info: (_o: unknown, msg: string) => seen.push(['info', msg]) } as unknown as Logger;
    const script: Array<number | Error> = [new ChainUnavailableError(new Error('ECONNREFUSED')), new ChainUnavailableError(new Error('ECONNREFUSED')), 3, new Error('bug')];
    const tick = quietWhileDown(
      'test',
      async () => {
        const next = script.shift()!;
        if (next instanceof Error) throw next;
        return next;
      },
      log,
    );
    expect(await tick()).to.equal(0);
    expect(await tick()).to.equal(0);
    expect(await tick()).to.equal(3);
    let error: unknown;
    await tick().catch((err: unknown) => (error = err));
    expect((error as Error).message).to.equal('bug');
    expect(seen).to.deep.equal([
      ['warn', 'chain node unreachable; waiting'],
      ['info', 'chain node reachable again'],
    ]);
  });
});
