// `make contracts`: compiles contracts/*.sol with the npm solc package (the compiler ships inside it; nothing is
// downloaded) and writes contracts/artifacts/<Name>.json (ABI + bytecode) and <Name>.ts (the same, typed for viem).
// The output is deterministic (no metadata hash, sorted inputs), so CI can check the committed artifacts for drift.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const solc = require('solc') as { compile(input: string, opts: { import: (p: string) => { contents: string } | { error: string } }): string; version(): string };

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const contractsDir = path.join(root, 'contracts');
const outDir = path.join(contractsDir, 'artifacts');
/**
 * The agent account (docs/CUSTODY.md) is compiled on its own with the optimizer tuned for size (20 runs) through the
 * IR pipeline (viaIR): with the approval threshold and the swap count (issues 26, 27) the legacy pipeline's code
 * passes the 24,576-byte limit (EIP-170) by about 400 bytes; the IR pipeline's was about 1.7 kB under it, and with
 * approveNewPayees and paidBefore (issue 27) it is 24,084 bytes, about 0.5 kB under. The
 * interface it imports goes with it.
 */
const CUSTODY = ['AgentAccount.sol', 'AgentAccountFactory.sol'];
const CUSTODY_SHARED = ['AggregatorV3Interface.sol'];
const all = readdirSync(contractsDir)
  .filter((f) => f.endsWith('.sol'))
  .sort();
const sources = all.filter((f) => !CUSTODY.includes(f));
const custodySources = [...CUSTODY, ...CUSTODY_SHARED].sort();

const settings = (runs: number, viaIR = false) => ({
  optimizer: { enabled: true, runs },
  ...(viaIR ? { viaIR } : {}),
  evmVersion: 'cancun',
  metadata: { bytecodeHash: 'none', appendCBOR: false },
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
});
const ours = (files: string[], runs: number, viaIR = false) => ({
  language: 'Solidity',
  sources: Object.fromEntries(files.map((f) => [f, { content: readFileSync(path.join(contractsDir, f), 'utf8') }])),
  settings: settings(runs, viaIR),
});
const input = ours(sources, 200);

/** Imports resolve from node_modules (`@openzeppelin/contracts/...`) and nowhere else. */
function findImport(importPath: string) {
  try {
    return { contents: readFileSync(path.join(root, 'node_modules', importPath), 'utf8') };
  } catch {
    return { error: `not found: ${importPath}` };
  }
}

type Solc = typeof solc;
type Output = {
  errors?: { severity: string; formattedMessage: string }[];
  contracts: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>>;
};

function compile(compiler: Solc, compilerInput: object): Output {
  const output = JSON.parse(compiler.compile(JSON.stringify(compilerInput), { import: findImport })) as Output;
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  for (const e of output.errors ?? []) process.stderr.write(e.formattedMessage);
  if (errors.length > 0) process.exit(1);
  return output;
}

/**
 * Sources compiled from npm packages as their authors pinned them: Morpho Blue (`pragma solidity 0.8.19`, its
 * oracle and IRM mocks) with solc 0.8.19 (the npm package `solc-0.8.19`, an alias of solc@0.8.19) and Morpho's own
 * settings (optimizer 999999 runs, paris). Written beside ours, `source` naming the package file.
 */
const VENDORED = {
  compiler: require('solc-0.8.19') as Solc,
  files: ['@morpho-org/morpho-blue/src/Morpho.sol', '@morpho-org/morpho-blue/src/mocks/OracleMock.sol', '@morpho-org/morpho-blue/src/mocks/IrmMock.sol'],
  settings: {
    optimizer: { enabled: true, runs: 999999 },
    evmVersion: 'paris',
    metadata: { bytecodeHash: 'none', appendCBOR: false },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};

const units: { output: Output; files: string[]; source: (f: string) => string; compiler: string }[] = [
  { output: compile(solc, input), files: sources, source: (f) => `contracts/${f}`, compiler: `solc ${solc.version()}` },
  { output: compile(solc, ours(custodySources, 20, true)), files: CUSTODY, source: (f) => `contracts/${f}`, compiler: `solc ${solc.version()}` },
  {
    output: compile(VENDORED.compiler, {
      language: 'Solidity',
      sources: Object.fromEntries(VENDORED.files.map((f) => [f, { content: readFileSync(path.join(root, 'node_modules', f), 'utf8') }])),
      settings: VENDORED.settings,
    }),
    files: VENDORED.files,
    source: (f) => `node_modules/${f}`,
    compiler: `solc ${VENDORED.compiler.version()}`,
  },
];

for (const { output, files, source, compiler } of units)
  for (const file of files) {
    for (const [name, contract] of Object.entries(output.contracts[file] ?? {})) {
      if (!contract.evm.bytecode.object) continue; // interfaces
      const artifact = { contractName: name, source: source(file), compiler, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
      writeFileSync(path.join(outDir, `${name}.json`), `${JSON.stringify(artifact, null, 2)}\n`);
      const ts = [
        `// Generated by \`make contracts\` from ${source(file)} (${compiler}); do not edit.`,
        `export const ${name.charAt(0).toLowerCase()}${name.slice(1)}Abi = ${JSON.stringify(contract.abi, null, 2)} as const;`,
        `export const ${name.charAt(0).toLowerCase()}${name.slice(1)}Bytecode = '0x${contract.evm.bytecode.object}' as const;`,
        '',
      ].join('\n\n');
      writeFileSync(path.join(outDir, `${name}.ts`), ts);
      process.stdout.write(`contracts/artifacts/${name}.json (${contract.evm.bytecode.object.length / 2} bytes)\n`);
    }
  }
