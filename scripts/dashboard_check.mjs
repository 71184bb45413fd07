// The dashboard in headless Chromium (Playwright), against the world
// scripts/dashboard-check.sh started: DASHBOARD_URL (the service's `/`), SIM_URL (the
// simulated GitHub), THE_LOOP and THE_LOOP_CONFIG (the CLI and its config), SHOTS (where
// screenshots go), BROWSER_NODE_PATH (where playwright-core is installed).
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.BROWSER_NODE_PATH}/`);
const { chromium } = require('playwright-core');

const { DASHBOARD_URL, SIM_URL, THE_LOOP, THE_LOOP_CONFIG, SHOTS } = process.env;
const ITEM = 'github:octo/app#1';
const PATIENCE = 30_000;

let passed = 0;
let failed = 0;
async function check(name, body) {
  try {
    await body();
    passed += 1;
    console.log(`ok - ${name}`);
  } catch (err) {
    failed += 1;
    console.log(`not ok - ${name}\n  ${String(err?.stack || err).replaceAll('\n', '\n  ')}`);
  }
}

async function act(action) {
  const answer = await fetch(`${SIM_URL}/_sim/actions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(action),
  });
  if (!answer.ok) throw new Error(`the simulator refused ${JSON.stringify(action)}: ${answer.status}`);
  return answer.json();
}

function cli(...args) {
  return execFileSync(THE_LOOP, ['--config', THE_LOOP_CONFIG, ...args], { encoding: 'utf8' });
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.setDefaultTimeout(PATIENCE);
  // What the page must never do: throw, or be refused something by its own policy.
  const faults = [];
  page.on('pageerror', (err) => faults.push(`uncaught: ${err.message}`));
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) faults.push(`CSP: ${message.text()}`);
  });

  await check('the page is served with a strict Content-Security-Policy', async () => {
    const answer = await page.goto(DASHBOARD_URL);
    const policy = answer.headers()['content-security-policy'] || '';
    if (!policy.includes("script-src 'self'") || !policy.includes("default-src 'none'")) {
      throw new Error(`policy: ${policy}`);
    }
  });

  await check('the board shows the started item among the running ones', async () => {
    const card = page.locator(`.column[data-state="running"] .card[data-ref="${ITEM}"]`);
    await card.waitFor();
    await page.screenshot({ path: `${SHOTS}/board.png`, fullPage: true });
  });

  await check('updates come over the stream when the service serves one, else by polling', async () => {
    const probe = new AbortController();
    const answer = await fetch(`${DASHBOARD_URL}api/v1/stream`, { signal: probe.signal });
    const streamed = (answer.headers.get('content-type') || '').startsWith('text/event-stream');
    probe.abort();
    const expected = streamed ? 'live' : 'polling';
    await page.locator(`#live-chip[data-mode="${expected}"]`).waitFor();
    console.log(`  (updates: ${expected})`);
  });

  await check('a title from GitHub is shown as text, never as markup', async () => {
    const card = page.locator(`.card[data-ref="${ITEM}"]`);
    await card.locator('.title', { hasText: '<img src=x onerror=alert(1)>' }).waitFor();
    if ((await card.locator('img').count()) !== 0) throw new Error('the title became an element');
  });

  await check('a new comment appears on the item page live, without a reload', async () => {
    await page.locator(`.card[data-ref="${ITEM}"] a.ref`).click();
    await page.locator(`article.item[data-ref="${ITEM}"] .delivery`).first().waitFor();
    await page.evaluate(() => {
      window.notReloaded = true;
    });
    const before = await page.locator('.delivery').count();
    const made = await act({
      action: 'comment',
      repo: 'octo/app',
      number: 1,
      author: 'alice',
      body: 'Please handle empty input too.',
    });
    await page.waitForFunction(
      ([count, id]) =>
        document.querySelectorAll('.delivery').length > count &&
        document.querySelector('article.item').textContent.includes(String(id)),
      [before, made.id],
      { timeout: PATIENCE },
    );
    if (!(await page.evaluate(() => window.notReloaded === true))) throw new Error('the page was reloaded');
    await page.screenshot({ path: `${SHOTS}/item.png`, fullPage: true });
  });

  await check("the item's attach command names its live tmux session", async () => {
    const attach = (await page.locator('pre.attach').first().textContent()).trim();
    if (!/^tmux .*attach-session -t =loop-github-octo-app-1$/.test(attach)) throw new Error(attach);
    // The same words asking tmux whether that session exists (exit 0: it does).
    execFileSync('sh', ['-c', attach.replace(' attach-session ', ' has-session ')]);
  });

  await check('an item waiting at its human gate needs you, and "Approve" asks the gate again', async () => {
    await page.locator('a[href="#/"]').first().click();
    const need = page.locator(`#needs-you .need[data-kind="human-gate"][data-ref="${ITEM}"]`);
    await need.waitFor();
    if (!(await need.textContent()).includes('phase-selection')) throw new Error(await need.textContent());
    await need.locator('a.action').click();
    await page.locator('button[data-action="approve"]').click();
    const dialog = page.locator('dialog#confirm');
    await dialog.waitFor();
    if (!(await dialog.textContent()).includes('Approve octo/app#1 at phase-selection')) {
      throw new Error(`not the approval's confirmation: ${await dialog.textContent()}`);
    }
    await page.locator('#confirm-ok').click();
    // Its gate reads the `the-loop execute` reply, which nobody gave yet: it still waits.
    await page.locator('[data-part="gate-notice"]', { hasText: 'Still waiting at phase-selection' }).waitFor();
    await page.screenshot({ path: `${SHOTS}/item-gate.png`, fullPage: true });
    const checked = cli('graph', 'check', ITEM);
    if (!checked.includes('→ phase-selection')) throw new Error(`graph check: ${checked}`);
  });

  await check('an authorized `the-loop execute` passes the gate, which leaves "Needs you" live', async () => {
    await act({ action: 'comment', repo: 'octo/app', number: 1, author: 'alice', body: 'the-loop execute' });
    await page.locator('button[data-action="approve"]').waitFor({ state: 'detached' });
    await page.locator('a[href="#/"]').first().click();
    await page.locator(`.card[data-ref="${ITEM}"]`).waitFor();
    if ((await page.locator('.need[data-kind="human-gate"]').count()) !== 0) throw new Error('the gate still needs you');
    // The card says where the item is now: the listing's graph follows the state file.
    await page.locator(`.card[data-ref="${ITEM}"] .phase`, { hasText: 'brainstorming' }).waitFor();
    const checked = cli('graph', 'check', ITEM);
    if (!checked.includes('→ brainstorming')) throw new Error(`graph check: ${checked}`);
    await page.locator(`.card[data-ref="${ITEM}"] a.ref`).click();
    await page.locator('button[data-verb="pause"]').waitFor();
  });

  await check('pausing from the page, confirmed, moves it to "Needs you"; the CLI agrees', async () => {
    await page.locator('button[data-verb="pause"]').click();
    const dialog = page.locator('dialog#confirm');
    await dialog.waitFor();
    if (!(await dialog.textContent()).includes('Pause octo/app#1')) throw new Error('not the pause confirmation');
    await page.locator('#confirm-ok').click();
    await page.locator('.badge.state-paused').waitFor();
    await page.locator('a[href="#/"]').first().click();
    await page.locator(`#needs-you .need[data-kind="session-paused"][data-ref="${ITEM}"]`).waitFor();
    await page.locator(`.column[data-state="paused"] .card[data-ref="${ITEM}"]`).waitFor();
    await page.screenshot({ path: `${SHOTS}/board-paused.png`, fullPage: true });
    const shown = JSON.parse(cli('--json', 'sessions', 'show', '--work-item', ITEM));
    const own = shown.session?.endpoints?.[ITEM];
    if (own?.status !== 'paused' || shown.control?.command !== 'pause') {
      throw new Error(`sessions show: ${JSON.stringify(shown)}`);
    }
  });

  await check('a cancelled confirmation does nothing', async () => {
    await page.locator(`.card[data-ref="${ITEM}"] a.ref`).click();
    await page.locator('button[data-verb="resume"]').click();
    await page.locator('#confirm-cancel').click();
    if (await page.locator('dialog#confirm').isVisible()) throw new Error('the dialog stayed open');
    if ((await page.locator('.actions .notice').textContent()) !== '') throw new Error('something was sent');
    const shown = JSON.parse(cli('--json', 'sessions', 'show', '--work-item', ITEM));
    if (shown.control?.command !== 'pause') throw new Error(`the resume went through: ${JSON.stringify(shown.control)}`);
  });

  await check('nothing on the page threw or broke its own policy', async () => {
    if (faults.length > 0) throw new Error(faults.join('\n'));
  });

  await check('a phone-sized viewport shows the board and the item without horizontal overflow', async () => {
    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
    });
    const small = await phone.newPage();
    small.setDefaultTimeout(PATIENCE);
    for (const [hash, ready] of [
      ['#/', `.card[data-ref="${ITEM}"]`],
      [`#/item/${encodeURIComponent(ITEM)}`, '.delivery'],
    ]) {
      await small.goto(`${DASHBOARD_URL}${hash}`);
      await small.locator(ready).first().waitFor();
      const [scroll, width] = await small.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      if (scroll > width) throw new Error(`${hash}: the page is ${scroll}px wide in a ${width}px viewport`);
    }
    await small.goto(DASHBOARD_URL);
    await small.locator(`.card[data-ref="${ITEM}"]`).waitFor();
    await small.screenshot({ path: `${SHOTS}/board-phone.png`, fullPage: true });
    await phone.close();
  });
} finally {
  await browser.close();
}

console.log(`dashboard-check: ${passed} passed, ${failed} failed`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
