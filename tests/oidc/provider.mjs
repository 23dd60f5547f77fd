// A real OpenID Connect provider on 127.0.0.1 for the dashboard's sign-in tests: npm
// `oidc-provider` (a certified implementation), with its development login pages, where the
// login name typed becomes the account's `sub`. Run by tests/src/oidc.rs:
//
//   OIDC_PROVIDER=<dir holding node_modules/oidc-provider> node tests/oidc/provider.mjs
//
// It listens on an ephemeral port and prints `PORT <n>`, then reads one line of JSON from stdin,
// `{"clients": [...], "accounts": {...}}` (the clients' redirect URIs exist only once the relay
// under test runs), and prints `READY` once it serves.
//
// Accounts: a login name listed in `accounts` gets that entry's claims (`email`,
// `email_verified`); any other name gets `<name>@example.test`, verified unless the name starts
// with `unverified`.
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const dir = process.env.OIDC_PROVIDER;
if (!dir) {
  console.error('provider.mjs: set OIDC_PROVIDER to the folder that holds node_modules/oidc-provider');
  process.exit(2);
}
const { default: Provider } = await import(
  pathToFileURL(path.join(dir, 'node_modules', 'oidc-provider', 'lib', 'index.js')).href
);

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = server.address().port;
console.log(`PORT ${port}`);

const input = readline.createInterface({ input: process.stdin });
const line = await new Promise((resolve) => input.once('line', resolve));
const setup = JSON.parse(line);
const accounts = setup.accounts ?? {};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: setup.clients,
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  cookies: { keys: ['repowire-test-only'] },
  pkce: { required: () => false },
  findAccount: (_ctx, id) => ({
    accountId: id,
    claims: () => {
      const known = accounts[id];
      return {
        sub: id,
        email: known?.email ?? `${id}@example.test`,
        email_verified: known?.email_verified ?? !id.startsWith('unverified'),
      };
    },
  }),
});
// Its development pages are its own; quiet its warnings about them.
provider.on('server_error', (_ctx, error) => console.error('provider error:', error));
server.on('request', provider.callback());
console.log('READY');
// Exits when the test closes stdin (or kills it).
input.on('close', () => process.exit(0));
