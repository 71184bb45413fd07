// Times the board's first paint in headless Chromium (see scripts/bench-dashboard.sh):
// DASHBOARD_URL, LOADS, RECORDS, BROWSER_NODE_PATH (where playwright-core is installed).
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.BROWSER_NODE_PATH}/`);
const { chromium } = require('playwright-core');

const { DASHBOARD_URL } = process.env;
const LOADS = Number(process.env.LOADS || 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const api = [];
let bytes = 0;
for (let i = 0; i < LOADS; i++) {
  const began = performance.now();
  const answer = await fetch(`${DASHBOARD_URL}api/v1/work-items`);
  const body = await answer.arrayBuffer();
  api.push(performance.now() - began);
  bytes = body.byteLength;
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const painted = [];
const contentful = [];
let cards = 0;
try {
  for (let i = 0; i < LOADS; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    await page.goto(DASHBOARD_URL);
    await page.waitForFunction(() => performance.getEntriesByName('board-painted').length > 0, null, { timeout: 60_000 });
    const [mark, fcp, drawn] = await page.evaluate(() => [
      performance.getEntriesByName('board-painted')[0].startTime,
      performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
      document.querySelectorAll('.card').length,
    ]);
    painted.push(mark);
    contentful.push(fcp);
    cards = drawn;
    await context.close();
  }
} finally {
  await browser.close();
}
const ms = (x) => `${x.toFixed(0)} ms`;
console.log(`GET /api/v1/work-items: median ${ms(median(api))} over ${LOADS} (${(bytes / 1e6).toFixed(2)} MB)`);
console.log(`board painted (navigation → every answer joined and drawn): median ${ms(median(painted))}, all ${painted.map(ms).join(', ')}`);
console.log(`first contentful paint: median ${ms(median(contentful))}`);
console.log(`cards drawn: ${cards} of ${process.env.RECORDS} work items (the rest behind "show more")`);
