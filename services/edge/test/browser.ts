import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/**
 * Debian's Chromium (`apt-get install -y chromium`), never a browser download. The flags keep
 * it off the network: on a closed network its background connections are refused otherwise.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Chromium {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Headless Chromium with a fresh profile (its own --user-data-dir), removed on close. */
export async function launchChromium(
  viewport = { width: 1280, height: 800 },
  deviceScaleFactor = 1,
): Promise<Chromium> {
  const profile = await mkdtemp(join(tmpdir(), 'holdfast-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport,
    deviceScaleFactor,
  });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** What one bar of the status page shows, read from the DOM (numbers and pixel geometry). */
export interface ShownBar {
  tenant: string;
  budget: string;
  used: number;
  held: number;
  limit: number;
  level: string;
  usedText: string;
  heldText: string;
  limitText: string;
  usedPx: number;
  heldPx: number;
  heldLeftPx: number;
  limitLeftPx: number;
  softLeftPx: number[];
}
