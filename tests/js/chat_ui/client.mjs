// The Node check: Agent Chat UI's calls from its dev origin, or through a proxy that forwards as the UI's
// server-side proxy (langgraph-nextjs-api-passthrough) does: only x-* and authorization headers, the body
// as a string (so fetch labels it text/plain, never application/json).
//   node client.mjs <server url> <direct|proxy> <origin> <document file> <question> [<question> ...]
// Prints one JSON line: what converse() returned, and each request the server saw (method, path, status).
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { converse } from "./conversation.mjs";

const [server, mode, origin, document, ...questions] = process.argv.slice(2);
const seen = [];

/** fetch with the page's Origin header, as a browser at `origin` sends it; every answer recorded. */
function pageFetch(input, init = {}) {
  const headers = new Headers(init.headers || (input instanceof Request ? input.headers : undefined));
  headers.set("origin", origin);
  return fetch(input, { ...init, headers }).then((res) => {
    seen.push({ method: init.method || "GET", url: String(input instanceof Request ? input.url : input), status: res.status });
    return res;
  });
}

/** A proxy on a free loopback port that forwards the way the UI's passthrough does. */
async function passthrough() {
  const proxy = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (key.startsWith("x-") || key === "authorization") headers[key] = value;
    }
    const options = { method: req.method, headers };
    if (["POST", "PUT", "PATCH"].includes(req.method)) options.body = Buffer.concat(chunks).toString("utf8");
    const answer = await fetch(`${server}${req.url}`, options);
    seen.push({ method: req.method, url: req.url, status: answer.status, forwarded_type: "string body" });
    const out = {};
    answer.headers.forEach((value, key) => {
      if (key !== "content-encoding" && key !== "content-length" && key !== "transfer-encoding") out[key] = value;
    });
    res.writeHead(answer.status, out);
    if (answer.body) for await (const chunk of answer.body) res.write(chunk);
    res.end();
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return proxy;
}

const data = fs.readFileSync(document).toString("base64");
const upload = {
  type: "file",
  source_type: "base64",
  mime_type: "text/markdown",
  data,
  metadata: { filename: path.basename(document) },
}; // the block Agent Chat UI's upload button makes
const turns = questions.map((q, i) => (i === 0 ? [{ type: "text", text: q }, upload] : q));

let proxy = null;
let apiUrl = server;
let fetchImpl = pageFetch;
if (mode === "proxy") {
  proxy = await passthrough();
  apiUrl = `http://127.0.0.1:${proxy.address().port}`;
  fetchImpl = (input, init = {}) => fetch(input, init); // the page calls its own origin: no Origin needed
}
try {
  const client = new Client({ apiUrl, apiKey: null, callerOptions: { fetch: fetchImpl, maxRetries: 0 } });
  const result = await converse(client, { apiUrl, assistant: "chat", turns, fetchImpl });
  process.stdout.write(JSON.stringify({ ...result, seen }) + "\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ error: String(error && error.message ? error.message : error), seen }) + "\n");
  process.exitCode = 1;
} finally {
  if (proxy) proxy.close();
}
