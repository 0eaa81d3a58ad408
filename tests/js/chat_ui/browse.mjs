// Open the page in headless Chromium, wait for the conversation to end, photograph it, print what it shows.
//   node browse.mjs <page url> <screenshot.png> [<chromium>]
import { chromium } from "playwright-core";

const [url, shot, executablePath = "/usr/bin/chromium"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const requests = [];
  page.on("response", (res) => requests.push({ method: res.request().method(), url: res.url(), status: res.status() }));
  const console_ = [];
  page.on("console", (msg) => console_.push(msg.text()));
  // every text an AI message of the conversation shows, as the DOM changes (statuses come and go)
  await page.addInitScript(() => {
    window.seenTexts = [];
    new MutationObserver(() => {
      for (const div of document.querySelectorAll(".message.ai")) {
        if (!window.seenTexts.includes(div.innerText)) window.seenTexts.push(div.innerText);
      }
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
  await page.goto(url);
  await page.waitForSelector("body[data-state]", { timeout: 120000 });
  await page.screenshot({ path: shot, fullPage: true });
  const result = await page.evaluate(() => window.chatResult);
  const text = await page.evaluate(() => document.body.innerText);
  const seen = await page.evaluate(() => window.seenTexts);
  process.stdout.write(JSON.stringify({ result, text, seen, requests, console: console_ }) + "\n");
} finally {
  await browser.close();
}
