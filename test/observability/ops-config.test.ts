// The operations knobs (README configuration table): metrics, tracing, draining, key rotation; and SIGTERM draining end to end.
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.js';
import { startServerProcess } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env, () => {});
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  return [];
}

describe('loadConfig: operations knobs', () => {
  it('leaves metrics, tracing and draining off by default', () => {
    const config = loadConfig({}, () => {});
    expect(config.metricsPort).to.equal(null);
    expect(config.otlpEndpoint).to.equal(null);
    expect(config.drainDelayMs).to.equal(0);
    expect(config.masterKeyPrevious).to.equal(null);
  });

  it('reads METRICS_PORT, METRICS_HOST, OTEL_* and DRAIN_DELAY_MS', () => {
    const config = loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SERVICE_NAME: 'api-eu', DRAIN_DELAY_MS: '5000' }, () => {});
    expect([config.metricsPort, config.metricsHost, config.otlpEndpoint, config.serviceName, config.drainDelayMs]).to.deep.equal([9464, '0.0.0.0', 'http://collector:4318', 'api-eu', 5000]);
  });

  it('lists every bad operations knob at once', () => {
    const problems = problemsOf({
      PORT: '3000',
      METRICS_PORT: '3000',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://collector',
      DRAIN_DELAY_MS: '20000',
      SHUTDOWN_GRACE_MS: '10000',
      MASTER_KEY: 'k'.repeat(40),
      MASTER_KEY_PREVIOUS: 'short',
    });
    expect(problems.some((p) => p.includes('METRICS_PORT must differ from PORT'))).to.equal(true);
    expect(problems.some((p) => p.startsWith('OTEL_EXPORTER_OTLP_ENDPOINT'))).to.equal(true);
    expect(problems.some((p) => p.includes('DRAIN_DELAY_MS must be shorter'))).to.equal(true);
    expect(problems.some((p) => p.startsWith('MASTER_KEY_PREVIOUS must be at least 32'))).to.equal(true);
    expect(problemsOf({ MASTER_KEY: 'k'.repeat(40), MASTER_KEY_PREVIOUS: 'k'.repeat(40) })).to.deep.equal(['MASTER_KEY_PREVIOUS must differ from MASTER_KEY']);
  });
});

describe('SIGTERM draining', () => {
  it('turns /readyz to 503 draining for DRAIN_DELAY_MS while still serving, then exits 0', async function () {
    this.timeout(60_000);
    const proc = await startServerProcess(testConfigEnv({ DRAIN_DELAY_MS: '3000', SHUTDOWN_GRACE_MS: '10000', RUN_WORKER: 'false' }));
    try {
      expect((await fetch(`${proc.baseUrl}/readyz`)).status).to.equal(200);
      proc.child.kill('SIGTERM');
      let ready: Response | undefined;
      for (let i = 0; i < 20; i++) {
        ready = await fetch(`${proc.baseUrl}/readyz`);
        if (ready.status === 503) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(ready!.status).to.equal(503);
      expect(((await ready!.json()) as { status: string }).status).to.equal('draining');
      expect((await fetch(`${proc.baseUrl}/healthz`)).status).to.equal(200);
      expect(await proc.exited).to.equal(0);
    } finally {
      await proc.stop('SIGKILL');
    }
  });
});
