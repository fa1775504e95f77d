// The deployment-file lint (scripts/lint-deploy.ts): passes on the repository, names each planted defect.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers/process.js';

const FILES = ['Dockerfile', 'compose.yaml', 'deploy', 'tsconfig.build.json', 'README.md', 'src/server.ts', 'scripts/worker.ts', 'scripts/migrate.ts'];

async function lint(root: string): Promise<{ code: number; output: string }> {
  return promisify(execFile)(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts/lint-deploy.ts'), root], { cwd: repoRoot }).then(
    (r) => ({ code: 0, output: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }),
  );
}

describe('lint:deploy', () => {
  let copy: string;
  beforeEach(() => {
    copy = mkdtempSync(join(tmpdir(), 'lint-deploy-'));
    for (const f of FILES) {
      mkdirSync(dirname(join(copy, f)), { recursive: true });
      cpSync(join(repoRoot, f), join(copy, f), { recursive: true });
    }
  });
  afterEach(() => rmSync(copy, { recursive: true, force: true }));
  const edit = (file: string, from: string | RegExp, to: string) => {
    const text = readFileSync(join(copy, file), 'utf8');
    const next = text.replace(from, to);
    expect(next, `${file} edit applies`).to.not.equal(text);
    writeFileSync(join(copy, file), next);
  };

  it('passes on the repository and says which external linters it could not run', async function () {
    this.timeout(30_000);
    const { code, output } = await lint(copy);
    expect(output).to.contain('deployment files: ok');
    expect(code).to.equal(0);
    expect(output).to.match(/(not run|ran): hadolint/);
  });

  it('fails naming a root runtime user, an unpinned base, an ADD of a URL and a shell-form CMD', async function () {
    this.timeout(30_000);
    edit('Dockerfile', 'USER 1000:1000', 'USER root');
    edit('Dockerfile', 'FROM node:24.21.0-bookworm-slim AS runtime', 'FROM node:latest AS runtime\nADD https://example.com/x.tgz /tmp/');
    edit('Dockerfile', 'CMD ["node", "--max-semi-space-size=8", "--heap-growing-percent=20", "dist/src/server.js"]', 'CMD node dist/src/server.js');
    const { code, output } = await lint(copy);
    expect(code).to.equal(1);
    expect(output).to.contain('runtime stage runs as root');
    expect(output).to.contain('base image node:latest is not pinned');
    expect(output).to.contain('ADD of a URL');
    expect(output).to.contain('CMD is not in exec');
  });

  it('fails naming a wrong readiness probe, a Service that selects nothing, an inline secret and a missing PodDisruptionBudget', async function () {
    this.timeout(30_000);
    edit('deploy/k8s/api-deployment.yaml', 'path: /readyz', 'path: /healthz');
    edit('deploy/k8s/api-service.yaml', 'app.kubernetes.io/component: api\n  ports', 'app.kubernetes.io/component: web\n  ports');
    edit('deploy/k8s/worker-deployment.yaml', '          envFrom:', '          env:\n            - name: MASTER_KEY\n              value: inline\n          envFrom:');
    edit('deploy/k8s/kustomization.yaml', '  - worker-pdb.yaml\n', '');
    rmSync(join(copy, 'deploy/k8s/worker-pdb.yaml'));
    const { code, output } = await lint(copy);
    expect(code).to.equal(1);
    expect(output).to.contain('API readinessProbe must be GET /readyz');
    expect(output).to.contain('no Service selects the API pods');
    expect(output).to.contain('MASTER_KEY set inline');
    expect(output).to.contain('agent-api-worker: no PodDisruptionBudget');
  });

  it('fails naming a compose file with one worker, a hard-coded MASTER_KEY and an unknown key', async function () {
    this.timeout(30_000);
    edit('compose.yaml', /\n {2}worker-2:\n(.*\n){4}/, '\n');
    edit('compose.yaml', 'MASTER_KEY: ${MASTER_KEY:?set MASTER_KEY (at least 32 characters)}', 'MASTER_KEY: hard-coded-key-hard-coded-key-0000');
    edit('compose.yaml', '    restart: "no"', '    restart: "no"\n    restrat: always');
    const { code, output } = await lint(copy);
    expect(code).to.equal(1);
    expect(output).to.contain('expected at least two workers, found 1');
    expect(output).to.contain('MASTER_KEY must come from the environment');
    expect(output).to.contain('(restrat)');
  });
});
