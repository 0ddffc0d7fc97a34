import { access, constants, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Flags that keep the browser off the network and quiet: nothing but the
 * test server is ever contacted. Playwright adds --headless and a fresh
 * temporary --user-data-dir of its own for every launch (and deletes it on
 * close), so no profile is shared between runs.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchBrowser(): Promise<Browser> {
  await access(CHROMIUM, constants.X_OK).catch(() => {
    throw new Error(
      `no chromium at ${CHROMIUM}: the browser tests (npm run test:system) need Debian's chromium; install it with \`apt-get install chromium\``,
    );
  });
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}

/** Where tests leave screenshots: under .slipway/ (ignored by git). */
export const SCREENSHOTS = path.resolve('.slipway', 'screenshots');

/** Where the screenshots of the README and docs/web-ui.md live: rewritten by every run of the browser tests (`npm run test:system`), so they show the pages as they are. */
const DOC_SCREENSHOTS = path.resolve('docs', 'screenshots');

export async function screenshot(page: Page, name: string, options: { forReadme?: boolean } = {}): Promise<void> {
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  if (options.forReadme) {
    await mkdir(DOC_SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(DOC_SCREENSHOTS, `${name}.png`), fullPage: true });
  }
}

/** A browser context (its own cookies) signed in with `token` through the sign-in form. */
export async function signedInContext(
  browser: Browser,
  baseURL: string,
  token: string,
  viewport = { width: 1280, height: 900 },
): Promise<BrowserContext> {
  const context = await browser.newContext({ baseURL, viewport });
  const page = await context.newPage();
  await page.goto('/sign-in');
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForURL((url) => url.pathname === '/'), page.click('button[type=submit]')]);
  await page.close();
  return context;
}
