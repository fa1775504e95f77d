// `npm run drill` (issue 24, acceptance 2): the compromised-server drill runs as a child process against its own
// Anvil and exits 0 only if every attack of the threat model failed on chain. Checked here: the exit code, at least
// 15 attack lines and every one of them refused, the threat model's named attacks among them, and one exposure line
// per agent read from the chain.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { repoRoot } from '../helpers/process.js';
import { cloneTemplateDatabase } from '../setup.js';

describe('npm run drill (compromised server against the chain)', function () {
  this.timeout(240_000);
  // The service runs on a clone of the run's migrated template (the embedded PGlite would migrate from scratch).
  let database: Awaited<ReturnType<typeof cloneTemplateDatabase>>;
  before(async () => {
    database = await cloneTemplateDatabase('drill');
  });
  after(async () => {
    await database?.drop();
  });

  it('attempts every attack of the threat model directly against the chain; each fails', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/drill.ts', '--database-url', database.url], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code, `${stdout}\n${stderr}`).to.equal(0);
    if (process.env.DRILL_ECHO) process.stdout.write(stdout);
    const attacks = stdout.split('\n').filter((l) => l.startsWith('attack '));
    expect(attacks.length).to.be.at.least(15);
    for (const line of attacks) expect(line).to.include('FAILED as it must');
    for (const named of [
      'over the per-transaction cap',
      'many transfers past the period cap',
      'pay an unapproved payee',
      'use a destination the owner just added',
      'raise the limits',
      'take ownership',
      'upgrade the code',
      'swap to an outside address',
      'vault withdrawal to an outside address',
      'borrow to an outside address',
      "replay the owner's old Resume",
      'claim a cheque before its unlock',
      'an x402 authorization past the cap',
      'the relayer key alone',
      'cancel the pause',
      'rotate the lane key',
      'above the approval threshold without the owner',
      'replay an approval already consumed',
      "replay the owner's signed ApproveSpend",
      'swaps past max_swaps_per_period',
      "unwrap a swap's output through an allowed protocol that is not WETH",
      "pay a new payee without the owner's approval",
      "a one-off payment to a new payee without the owner's approval",
      "an x402 authorization to a new payee without the owner's approval",
      "use another payee's new-payee approval",
      "replay the owner's signed new-payee ApproveSpend",
      'mark the attacker as paid before',
      'turn approve_new_payees off',
    ])
      expect(
        attacks.some((l) => l.includes(named)),
        named,
      ).to.equal(true);
    const exposures = stdout.split('\n').filter((l) => /^agent \d+ 0x[0-9a-fA-F]{40} {2}exposure /.test(l));
    expect(exposures).to.have.length(4);
    // The drained agent has nothing left this period; the paused one exposes nothing.
    expect(exposures[1]).to.include('exposure 0 USD');
    expect(exposures[3]).to.match(/exposure 0 USD .*paused/);
    expect(stdout).to.match(/\n(\d+) attacks, \1 failed, 0 not stopped/);
    // The relayer key came out of the database dump, opened with MASTER_KEY.
    expect(stdout).to.match(/^stolen: \d+ tables \(\d+ rows\), MASTER_KEY, the relayer key 0x[0-9a-fA-F]{40}, \d+ lane keys \([1-9]\d* from the dump\)/m);
    // The agent the service made (its lane key from the dump) is attacked too.
    expect(attacks.filter((l) => l.includes('service agent:'))).to.have.length(4);
  });
});
