// The dashboard in a real browser (Debian's Chromium, driven by npm playwright-core; no browser
// download): tests/tests/it/dashboard_browser.rs sets up a relay with peers and runs this with
//   node dashboard.mjs BASE LINK_PATH API_KEY SCREENSHOT_DIR
// (PLAYWRIGHT_CORE names the playwright-core module, REPOWIRE_CHROMIUM the browser). It signs
// in with the one-time link by clicking, checks the cookie, the overview and what a hostile
// peer said, follows the event log live, walks the page with the keyboard (skip link, sign out), reads the page with
// JavaScript off at a phone's width (sign-in by API key through the plain form), checks light and
// dark, that no Content-Security-Policy violation or script error happened, and saves
// screenshots. Any failed check throws: a non-zero exit with the reason.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import readline from 'node:readline';

const [base, linkPath, apiKey, shots] = process.argv.slice(2);
assert.ok(base && linkPath && apiKey && shots, 'usage: dashboard.mjs BASE LINK_PATH API_KEY SCREENSHOT_DIR');
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
function watch(page, name) {
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`${name}: console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`${name}: script error: ${e.message}`));
}
// The test makes things happen between steps: this says READY <step> and waits for its "go".
const input = readline.createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
async function handshake(step) {
  console.log(`READY ${step}`);
  const { value, done } = await lines.next();
  assert.ok(!done && value === 'go', `the test did not do its part of ${step}`);
}
const checked = [];
function ok(what) { checked.push(what); }

try {
  // 1. A laptop-sized window: the link, one click.
  const desk = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
  const page = await desk.newPage();
  watch(page, 'desk');
  await page.goto(base + linkPath);
  assert.equal(new URL(page.url()).pathname, '/dashboard/signin');
  await page.getByRole('button', { name: 'Sign in to this browser' }).click();
  await page.waitForURL(base + '/dashboard');
  ok('the link signs in with one click');

  const cookies = await desk.cookies(base + '/dashboard');
  const session = cookies.find((c) => c.name === 'repowire_dashboard');
  assert.ok(session, `no session cookie among ${JSON.stringify(cookies.map((c) => c.name))}`);
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, 'Strict');
  assert.equal(session.path, '/dashboard');
  assert.equal(await page.evaluate(() => document.cookie.includes('repowire_dashboard')), false);
  ok('the cookie is HttpOnly, Secure, SameSite=Strict, Path=/dashboard, and scripts cannot read it');

  await assert.doesNotReject(page.getByRole('heading', { level: 1, name: /web/ }).waitFor());
  const row = page.getByRole('row', { name: /builder/ });
  await row.waitFor();
  const rowText = await row.innerText();
  assert.match(rowText, /<img src=x onerror=window\.__pwned=true> building/, `the description is not shown as text: ${rowText}`);
  assert.equal(await page.locator('table img').count(), 0, 'a peer\'s text made an element');
  assert.equal(await page.evaluate(() => window.__pwned === true), false);
  ok('a peer\'s hostile description is shown as text, not run');

  const meters = await page.locator('meter').count();
  assert.ok(meters >= 1, 'no usage meter');
  ok('usage against the plan is drawn as meters');

  await page.screenshot({ path: `${shots}/overview-1280x800-light.png`, fullPage: true });
  const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(light, 'rgb(255, 255, 255)');
  assert.equal(dark, 'rgb(17, 19, 24)');
  await page.screenshot({ path: `${shots}/overview-1280x800-dark.png`, fullPage: true });
  ok('light and dark follow the system setting');

  // Asks and Keys from the header's links; a key made with the plain form (no script), its
  // text shown once in a read-only field.
  await page.getByRole('link', { name: 'Asks' }).click();
  await page.getByRole('heading', { level: 1, name: 'Asks' }).waitFor();
  await page.getByRole('combobox', { name: 'State' }).selectOption('answered');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/state=answered/);
  ok('the Asks page and its filter form');
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.waitForURL(base + '/dashboard/keys');
  await page.getByRole('textbox', { name: 'Label' }).fill('made in chromium');
  await page.getByRole('button', { name: 'Make the key' }).click();
  const made = await page.getByRole('textbox', { name: 'The key' }).inputValue();
  assert.match(made, /^rw_live_/);
  await page.screenshot({ path: `${shots}/keys-1280x800.png`, fullPage: true });
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.waitForURL(base + '/dashboard/keys');
  await page.getByRole('button', { name: /Revoke made in chromium/ }).waitFor();
  assert.equal((await page.content()).includes(made), false, 'the key text was shown again');
  ok('a key is made from the Keys page, its text shown once');

  // The event log, live: the page says so, then entries the test makes happen now (it waits
  // for the line below) appear at the top without a reload, their text as text.
  await page.getByRole('link', { name: 'Events' }).click();
  await page.waitForURL(base + '/dashboard/events');
  await page.locator('#live[data-state=live]').waitFor();
  await handshake('events');
  const joined = page.getByRole('row', { name: /online watcher \(ops\)/ });
  await joined.waitFor({ timeout: 15000 });
  const said = page.getByRole('row', { name: /watcher \(ops\) → builder/ });
  await said.waitFor({ timeout: 15000 });
  assert.match(await said.innerText(), /<img src=x onerror=window\.__pwned=true> are you there\?/);
  assert.equal(await page.locator('table img').count(), 0, 'a message made an element');
  assert.equal(await page.evaluate(() => window.__pwned === true), false);
  const top = await page.locator('#events tbody tr').first().innerText();
  assert.match(top, /watcher|builder/, `the newest entry is not at the top: ${top}`);
  await page.screenshot({ path: `${shots}/events-1280x800.png`, fullPage: true });
  ok('the event log adds entries live at the top, their text as text');

  // Send a notify from the browser; the agent takes it in (injected), and the event log shows
  // that live.
  await page.getByRole('link', { name: 'Send' }).click();
  await page.waitForURL(base + '/dashboard/compose');
  await page.getByRole('textbox', { name: 'To' }).fill('builder');
  await page.getByRole('textbox', { name: 'Message' }).fill('please rebase on main');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByText(/Accepted for builder/).waitFor();
  await handshake('sent');
  await page.getByRole('link', { name: 'Events' }).click();
  await page.waitForURL(base + '/dashboard/events');
  await page.getByRole('row', { name: /injected builder ←/ }).first().waitFor({ timeout: 15000 });
  ok('a notify sent from the browser reaches the agent, and its state shows injected');

  // Approve a gated tool call from the browser: the agent asks, the person presses Allow.
  await handshake('question');
  await page.getByRole('link', { name: 'Approvals' }).click();
  await page.waitForURL(base + '/dashboard/approvals');
  const gated = page.getByRole('listitem').filter({ hasText: 'Bash: cargo publish' });
  await gated.waitFor();
  assert.equal(await page.locator('.asks script').count(), 0);
  await page.screenshot({ path: `${shots}/approvals-1280x800.png`, fullPage: true });
  await gated.getByRole('button', { name: /^Allow/ }).click();
  await page.getByText('Answered `allow`.').waitFor();
  await handshake('answered');
  ok('a gated tool call is allowed from the browser');

  // 2. The keyboard: the first Tab reaches the skip link, which moves focus to the content;
  // Sign out is reachable and works from the keyboard.
  await page.goto(base + '/dashboard');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
  ok('the first Tab is a skip link to the content');
  await page.goto(base + '/dashboard');
  let reached = false;
  for (let i = 0; i < 30 && !reached; i += 1) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement?.textContent === 'Sign out');
  }
  assert.ok(reached, 'Sign out is not reachable with Tab');
  const focusVisible = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert.notEqual(focusVisible, 'none', 'the focused control shows no outline');
  await page.keyboard.press('Enter');
  await page.waitForURL(base + '/dashboard/signin');
  assert.equal((await desk.cookies(base + '/dashboard')).some((c) => c.name === 'repowire_dashboard'), false);
  ok('Sign out is reachable and works with the keyboard, and removes the cookie');
  await desk.close();

  // 3. A phone, JavaScript off: reading and the plain forms work.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, javaScriptEnabled: false, isMobile: true });
  const small = await phone.newPage();
  watch(small, 'phone');
  await small.goto(base + '/dashboard');
  assert.equal(new URL(small.url()).pathname, '/dashboard/signin');
  await small.getByRole('textbox', { name: 'API key' }).fill(apiKey);
  await small.getByRole('button', { name: 'Sign in', exact: true }).click();
  await small.waitForURL(base + '/dashboard');
  await small.getByText('builder').first().waitFor();
  // Against the device's width, not innerWidth: a phone widens its layout viewport to fit
  // content that overflows. (evaluate runs through the protocol, with the page's scripts off.)
  const overflow = await small.evaluate(() => document.scrollingElement.scrollWidth - 390);
  assert.ok(overflow <= 1, `the page is wider than the phone by ${overflow}px`);
  await small.screenshot({ path: `${shots}/overview-390x844-nojs.png`, fullPage: true });
  ok('at a phone\'s width with JavaScript off: sign-in by key, the overview, no sideways scroll');
  await phone.close();

  assert.deepEqual(problems, [], problems.join('\n'));
  ok('no script error and no Content-Security-Policy violation');
  console.log(JSON.stringify({ ok: true, checked }));
} finally {
  input.close(); // or node waits for more lines and never exits
  await browser.close();
}
