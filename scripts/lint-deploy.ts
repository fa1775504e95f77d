// Lints the deployment files without a Docker engine or a cluster: Dockerfile rules, compose.yaml and deploy/k8s
// against the JSON Schemas in deploy/schemas, and cross-file checks (probes, selectors, Secret, documented variables).
// Runs hadolint, kubeconform and `kubectl kustomize` too when they are on PATH. Usage: lint-deploy [ROOT]
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

type Obj = Record<string, unknown>;
const root = process.argv[2] ?? process.cwd();
const problems: string[] = [];
const notes: string[] = [];
const problem = (file: string, message: string): void => {
  problems.push(`${file}: ${message}`);
};
const read = (rel: string) => readFileSync(join(root, rel), 'utf8');
const asObj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const asArr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const ajv = new Ajv2020({ allErrors: true, strict: false });
const schema = (name: string) => ajv.compile(JSON.parse(read(`deploy/schemas/${name}`)) as object);
const report = (file: string, validate: ReturnType<typeof schema>, value: unknown) => {
  if (validate(value)) return;
  // oneOf failures repeat per branch: keep the deepest, distinct messages.
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    const line = `${e.instancePath || '/'} ${e.message ?? ''}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`;
    if (!seen.has(line)) seen.add(line);
  }
  for (const line of [...seen].slice(0, 12)) problem(file, `schema: ${line}`);
};

/** `node [--v8-flag ...] dist/<path>.js` must come from a TypeScript entry the build compiles. */
function checkEntry(file: string, command: unknown): void {
  const args = asArr(command).map(String);
  const entry = args.slice(1).find((a) => !a.startsWith('--'));
  if (args[0] !== 'node' || !entry?.startsWith('dist/')) return problem(file, `command ${JSON.stringify(args)} does not run compiled JavaScript (node dist/...)`);
  const source = entry.replace(/^dist\//, '').replace(/\.js$/, '.ts');
  if (!existsSync(join(root, source))) problem(file, `${entry} has no source ${source}`);
  const build = JSON.parse(read('tsconfig.build.json')) as { include: string[] };
  if (!build.include.some((inc) => source === inc || source.startsWith(`${inc}/`))) problem(file, `${source} is not in tsconfig.build.json's include`);
}

// ---- Dockerfile ----------------------------------------------------------------------------
function lintDockerfile(): void {
  const file = 'Dockerfile';
  const lines = read(file)
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const froms = lines.filter((l) => /^FROM\s/i.test(l));
  if (froms.length < 2) problem(file, 'not multi-stage (expected a build stage and a runtime stage)');
  const stages = new Set<string>();
  for (const from of froms) {
    const [, image, alias] = /^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?/i.exec(from) ?? [];
    if (!image) continue;
    if (!stages.has(image) && !/@sha256:[0-9a-f]{64}$/.test(image)) {
      const tag = /:([^/:]+)$/.exec(image)?.[1];
      if (!tag || tag === 'latest' || !/\d+\.\d+/.test(tag)) problem(file, `base image ${image} is not pinned to a version (or a digest)`);
    }
    if (alias) stages.add(alias);
  }
  const last = lines.lastIndexOf(froms[froms.length - 1] ?? '');
  const users = lines.slice(last).filter((l) => /^USER\s/i.test(l));
  const user = users[users.length - 1]?.split(/\s+/)[1];
  if (!user) problem(file, 'the runtime stage sets no USER (it would run as root)');
  else if (/^(root|0)(:|$)/.test(user)) problem(file, `the runtime stage runs as ${user}`);
  for (const l of lines) {
    if (/^ADD\s/i.test(l) && /https?:\/\//i.test(l)) problem(file, `ADD of a URL: ${l}`);
    if (/^ADD\s/i.test(l)) problem(file, `ADD where COPY does: ${l}`);
    if (/^RUN\s.*\bnpm (install|i)\b/i.test(l)) problem(file, `npm install instead of npm ci: ${l}`);
    if (/^RUN\s.*\bsudo\b/i.test(l)) problem(file, `sudo: ${l}`);
  }
  const cmd = lines.filter((l) => /^CMD\s/i.test(l)).pop();
  if (!cmd) problem(file, 'no CMD');
  else {
    try {
      checkEntry(file, JSON.parse(cmd.replace(/^CMD\s+/i, '')));
    } catch {
      problem(file, 'CMD is not in exec (JSON array) form');
    }
  }
  if (!lines.some((l) => /^HEALTHCHECK\s/i.test(l))) problem(file, 'no HEALTHCHECK');
}

// ---- compose.yaml --------------------------------------------------------------------------
function lintCompose(): void {
  const file = 'compose.yaml';
  const doc = parseYaml(read(file), { merge: true }) as Obj;
  report(file, schema('compose.schema.json'), doc);
  const services = asObj(doc.services);
  const byCommand = (entry: string) => Object.entries(services).filter(([, s]) => asArr(asObj(s).command).includes(entry));
  const apis = byCommand('dist/src/server.js');
  const workers = byCommand('dist/scripts/worker.js');
  const migrations = byCommand('dist/scripts/migrate.js');
  if (apis.length < 2) problem(file, `expected at least two API replicas, found ${apis.length}`);
  if (workers.length < 2) problem(file, `expected at least two workers, found ${workers.length}`);
  if (migrations.length !== 1) problem(file, `expected one migration job, found ${migrations.length}`);
  for (const name of ['postgres', 'redis']) if (!asObj(services[name]).healthcheck) problem(file, `service ${name} missing or without a healthcheck`);
  for (const [name, svc] of [...apis, ...workers, ...migrations]) {
    const s = asObj(svc);
    checkEntry(`${file} ${name}`, s.command);
    const env = asObj(s.environment);
    if (typeof env.MASTER_KEY !== 'string' || !/^\$\{MASTER_KEY[:?}]/.test(env.MASTER_KEY)) problem(file, `${name}: MASTER_KEY must come from the environment (\${MASTER_KEY:?...}), not the file`);
    if (env.NODE_ENV !== 'production') problem(file, `${name}: NODE_ENV is not production`);
    checkDocumented(`${file} ${name}`, Object.keys(env));
  }
  for (const [name, svc] of apis) if (asObj(asObj(svc).environment).RUN_WORKER !== 'false') problem(file, `${name}: an API replica beside separate workers needs RUN_WORKER=false`);
  const migrate = migrations[0]?.[0];
  for (const [name, svc] of [...apis, ...workers]) {
    const dep = asObj(asObj(asObj(svc).depends_on)[migrate ?? '']);
    if (dep.condition !== 'service_completed_successfully') problem(file, `${name} must wait for ${migrate} (service_completed_successfully)`);
  }
  if (migrate && asObj(services[migrate]).restart !== 'no') problem(file, `${migrate} must not restart`);
}

// ---- deploy/k8s ----------------------------------------------------------------------------
interface K8sObject {
  file: string;
  kind: string;
  name: string;
  body: Obj;
}

function lintKubernetes(): void {
  const dir = 'deploy/k8s';
  const validate = schema('k8s.schema.json');
  const objects: K8sObject[] = [];
  const files = readdirSync(join(root, dir)).filter((f) => f.endsWith('.yaml'));
  for (const f of files) {
    const rel = `${dir}/${f}`;
    for (const d of parseAllDocuments(read(rel))) {
      if (d.errors.length) problem(rel, `YAML: ${d.errors[0]!.message}`);
      const body = asObj(d.toJSON());
      if (Object.keys(body).length === 0) continue;
      report(rel, validate, body);
      objects.push({ file: rel, kind: String(body.kind), name: String(asObj(body.metadata).name), body });
    }
  }
  const find = (kind: string, pred: (o: K8sObject) => boolean = () => true) => objects.filter((o) => o.kind === kind && pred(o));
  const containersOf = (o: K8sObject) => asArr(asObj(asObj(asObj(asObj(o.body.spec).template).spec)).containers).map(asObj);
  const runs = (entry: string) => (o: K8sObject) => containersOf(o).some((c) => asArr(c.command).includes(entry));
  const podLabels = (o: K8sObject) => asObj(asObj(asObj(asObj(o.body.spec).template).metadata).labels);
  const selects = (selector: Obj, labels: Obj) => Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

  const kustomization = find('Kustomization')[0];
  if (!kustomization) problem(dir, 'no kustomization.yaml');
  else {
    const listed = asArr(kustomization.body.resources).map(String);
    for (const r of listed) if (!existsSync(join(root, dir, r))) problem(kustomization.file, `resource ${r} does not exist`);
    for (const f of files) if (f !== 'kustomization.yaml' && f !== 'secret.example.yaml' && !listed.includes(f)) problem(kustomization.file, `${f} is not listed in resources`);
  }

  const api = find('Deployment', runs('dist/src/server.js'));
  const worker = find('Deployment', runs('dist/scripts/worker.js'));
  const job = find('Job', runs('dist/scripts/migrate.js'));
  if (api.length !== 1) problem(dir, `expected one API Deployment (node dist/src/server.js), found ${api.length}`);
  if (worker.length !== 1) problem(dir, `expected one worker Deployment (node dist/scripts/worker.js), found ${worker.length}`);
  if (job.length !== 1) problem(dir, `expected one migration Job (node dist/scripts/migrate.js), found ${job.length}`);
  const secret = find('Secret')[0];
  const configMap = find('ConfigMap')[0];
  if (!secret) problem(dir, 'no Secret example naming the secret keys');
  for (const o of [...api, ...worker, ...job]) {
    const selector = asObj(asObj(asObj(o.body.spec).selector).matchLabels);
    if (o.kind === 'Deployment' && !selects(selector, podLabels(o))) problem(o.file, `${o.name}: selector does not match the pod template labels`);
    for (const c of containersOf(o)) {
      checkEntry(`${o.file} ${o.name}`, c.command);
      const refs = asArr(c.envFrom).map(asObj);
      const secretRefs = refs.map((r) => asObj(r.secretRef).name).filter(Boolean);
      if (!secretRefs.length) problem(o.file, `${o.name}: secrets do not come from a Secret (envFrom.secretRef)`);
      for (const n of secretRefs) if (n !== secret?.name) problem(o.file, `${o.name}: secretRef ${String(n)} is not the Secret ${secret?.name}`);
      for (const r of refs.map((x) => asObj(x.configMapRef).name).filter(Boolean)) if (r !== configMap?.name) problem(o.file, `${o.name}: configMapRef ${String(r)} does not exist`);
      for (const e of asArr(c.env).map(asObj))
        if (/KEY|PASSWORD|SECRET|DATABASE_URL|REDIS_URL/.test(String(e.name))) problem(o.file, `${o.name}: ${String(e.name)} set inline; secrets belong in the Secret`);
    }
  }
  for (const o of api) {
    const c = containersOf(o)[0] ?? {};
    if (asObj(asObj(c.livenessProbe).httpGet).path !== '/healthz') problem(o.file, 'API livenessProbe must be GET /healthz');
    if (asObj(asObj(c.readinessProbe).httpGet).path !== '/readyz') problem(o.file, 'API readinessProbe must be GET /readyz');
    const services = find('Service', (s) => selects(asObj(asObj(s.body.spec).selector), podLabels(o)));
    if (services.length === 0) problem(o.file, 'no Service selects the API pods');
    const portNames = new Set(asArr(c.ports).map((p) => asObj(p).name));
    for (const s of services)
      for (const p of asArr(asObj(s.body.spec).ports).map(asObj))
        if (typeof p.targetPort === 'string' && !portNames.has(p.targetPort)) problem(s.file, `targetPort ${p.targetPort} is not a port of the API container`);
    const grace = Number(asObj(asObj(asObj(o.body.spec).template).spec).terminationGracePeriodSeconds ?? 30) * 1000;
    const data = asObj(configMap?.body.data);
    const shutdownGrace = Number(data.SHUTDOWN_GRACE_MS ?? 10_000);
    if (grace <= shutdownGrace) problem(o.file, `terminationGracePeriodSeconds (${grace / 1000}) must exceed SHUTDOWN_GRACE_MS (${shutdownGrace} ms) or pods are killed mid-drain`);
    if (Number(data.DRAIN_DELAY_MS ?? 0) >= shutdownGrace) problem(configMap?.file ?? dir, 'DRAIN_DELAY_MS must be shorter than SHUTDOWN_GRACE_MS');
  }
  for (const o of [...api, ...worker]) {
    if (!find('PodDisruptionBudget', (p) => selects(asObj(asObj(asObj(p.body.spec).selector).matchLabels), podLabels(o))).length)
      problem(o.file, `${o.name}: no PodDisruptionBudget selects these pods`);
  }
  if (configMap) checkDocumented(configMap.file, Object.keys(asObj(configMap.body.data)));
  if (secret) checkDocumented(secret.file, Object.keys(asObj(secret.body.stringData)));
}

/** Every variable a deployment file sets is one the README's configuration table documents (src/config.ts reads it). */
function checkDocumented(file: string, names: string[]): void {
  const readme = read('README.md');
  for (const name of names) if (!readme.includes(`\`${name}\``)) problem(file, `${name} is not documented in README.md (a typo, or a variable src/config.ts does not read)`);
}

/** External linters, when installed; their absence is reported, not hidden. */
function runIfInstalled(tool: string, args: string[], what: string): void {
  const probe = spawnSync(tool, ['--version'], { encoding: 'utf8' });
  if (probe.error) {
    notes.push(`not run: ${tool} (${what}) is not installed here`);
    return;
  }
  const run = spawnSync(tool, args, { cwd: root, encoding: 'utf8' });
  if (run.status !== 0) problem(tool, `${what} failed:\n${(run.stdout + run.stderr).trim()}`);
  else notes.push(`ran: ${tool} ${args.join(' ')}`);
}

lintDockerfile();
lintCompose();
lintKubernetes();
runIfInstalled('hadolint', ['Dockerfile'], 'Dockerfile lint');
runIfInstalled('kubectl', ['kustomize', 'deploy/k8s'], 'kustomize build');
runIfInstalled('kubeconform', ['-strict', '-summary', '-ignore-filename-pattern', 'kustomization', 'deploy/k8s'], 'Kubernetes schema validation');
for (const n of notes) process.stdout.write(`${n}\n`);
if (problems.length) {
  process.stderr.write(`deployment files: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write('deployment files: ok (Dockerfile, compose.yaml, deploy/k8s)\n');
