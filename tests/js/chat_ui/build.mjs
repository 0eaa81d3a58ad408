// Bundle the page and its SDK for the browser:  node build.mjs <folder>  (writes index.html and page.js there).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2]);
fs.mkdirSync(out, { recursive: true });
await build({
  entryPoints: [path.join(here, "page.mjs")],
  bundle: true,
  format: "esm",
  platform: "browser",
  outfile: path.join(out, "page.js"),
  logLevel: "warning",
});
fs.copyFileSync(path.join(here, "index.html"), path.join(out, "index.html"));
