// Sign-in through an OpenID Connect provider in a real browser (Debian's Chromium, npm
// playwright-core): tests/tests/it/dashboard_oidc_browser.rs runs a relay at http://localhost:P
// and npm oidc-provider at http://127.0.0.1:Q — two sites, as in production — and runs
//   node oidc.mjs BASE SCREENSHOT_DIR
// It clicks "Sign in with Test IdP", signs in as `alice` on the provider's pages, consents, and
// checks that the browser comes back signed in: the session cookie is Strict and still reaches
// the dashboard after the provider's cross-site redirect (the callback's page moves on by a
// same-site navigation), the Lax binding cookie is gone, and no script error or CSP violation
// happened on the relay's pages. Then the Members page, screenshotted. Any failed check throws.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';

const [base, shots] = process.argv.slice(2);
assert.ok(base && shots, 'usage: oidc.mjs BASE SCREENSHOT_DIR');
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.REPOWIRE_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // The provider's development pages import a web font: nothing leaves 127.0.0.1.
  await context.route((url) => !['localhost', '127.0.0.1'].includes(url.hostname), (r) => r.abort());
  const page = await context.newPage();
  const ours = () => page.url().startsWith(base);
  page.on('console', (m) => { if (m.type() === 'error' && ours()) problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => { if (ours()) problems.push(`script error: ${e.message}`); });

  await page.goto(base + '/dashboard/signin');
  await page.getByRole('button', { name: 'Sign in with Test IdP' }).click();
  await page.waitForURL((url) => url.hostname === '127.0.0.1');
  await page.locator('input[name=login]').fill('alice');
  await page.locator('input[name=password]').fill('anything');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL(base + '/dashboard', { timeout: 15000 });
  await page.locator('.who[title^="oidc:alice@example.test"]').waitFor();

  const cookies = await context.cookies(base + '/dashboard/oidc/callback');
  const session = cookies.find((c) => c.name === 'repowire_dashboard');
  assert.ok(session, `no session cookie among ${JSON.stringify(cookies.map((c) => c.name))}`);
  assert.equal(session.sameSite, 'Strict');
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(cookies.find((c) => c.name === 'repowire_oidc'), undefined, 'the binding cookie is cleared');
  await page.screenshot({ path: `${shots}/oidc-overview-1280x800.png` });

  await page.goto(base + '/dashboard/members');
  await page.getByText('alice@example.test').first().waitFor();
  await page.screenshot({ path: `${shots}/members-1280x800.png`, fullPage: true });
  assert.deepEqual(problems, []);
  console.log('OK signed in through the provider; the Strict session cookie reached /dashboard');
} catch (e) {
  const pages = browser.contexts().flatMap((c) => c.pages());
  for (const p of pages) console.log(`at ${p.url()}:\n${(await p.content().catch(() => '')).slice(0, 2000)}`);
  throw e;
} finally {
  await browser.close();
}
