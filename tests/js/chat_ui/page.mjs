// The browser page: a chat in the layout of Agent Chat UI (thread history on the left, the conversation on the
// right), driven by the published LangGraph SDK from this page's own origin. The server and the questions come
// from the query string: ?api=http://127.0.0.1:2025&doc=falcon.md&q=first&q=second
import { Client } from "@langchain/langgraph-sdk";
import { marked } from "marked";
import { converse, contentText, isStatus } from "./conversation.mjs";

const params = new URLSearchParams(location.search);
const apiUrl = params.get("api");
const doc = params.get("doc");
const questions = params.getAll("q");
const main = document.querySelector("main");
const history = document.querySelector("#history");
const status = document.querySelector("#status");

function bubble(kind, html) {
  const div = document.createElement("div");
  div.className = `message ${kind}`;
  div.innerHTML = html;
  main.appendChild(div);
  return div;
}

function humanHtml(content) {
  if (typeof content === "string") return marked.parseInline(content);
  const words = marked.parseInline(contentText(content));
  const files = content
    .filter((b) => b.type === "file")
    .map((b) => `<span class="file">attached: ${b.metadata.filename}</span>`)
    .join(" ");
  return `${words}<div>${files}</div>`;
}

const shown = {};
async function run() {
  status.textContent = `Connecting to ${apiUrl} (assistant: chat)`;
  const bytes = new Uint8Array(await (await fetch(doc)).arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  const types = { pdf: "application/pdf", md: "text/markdown", txt: "text/plain", html: "text/html" };
  const mime_type = types[doc.split(".").pop().toLowerCase()] || "application/octet-stream";
  // the block Agent Chat UI's upload button makes
  const upload = { type: "file", source_type: "base64", mime_type, data: btoa(binary), metadata: { filename: doc } };
  const turns = questions.map((q, i) => (i === 0 ? [{ type: "text", text: q }, upload] : q));
  const client = new Client({ apiUrl, apiKey: null, callerOptions: { maxRetries: 0 } });
  const result = await converse(client, {
    apiUrl,
    assistant: "chat",
    turns,
    onHuman: (content) => bubble("human", humanHtml(content)),
    // As Agent Chat UI's useStream merges them: a streamed message is drawn after the others until a state
    // comes that does not hold it (a step's status), and drawn again, last, when its next tokens come.
    onToken: (id, sofar) => {
      shown[id] = shown[id] || bubble("ai", "");
      if (!shown[id].isConnected) main.appendChild(shown[id]);
      shown[id].innerHTML = marked.parse(sofar);
    },
    onValues: (values) => {
      const kept = new Set((values.messages || []).map((m) => m.id));
      for (const [id, div] of Object.entries(shown)) if (!kept.has(id) && div.isConnected) div.remove();
    },
  });
  for (const item of result.history) {
    const li = document.createElement("li");
    li.textContent = item.label;
    if (item.thread_id === result.thread_id) li.className = "current";
    history.appendChild(li);
  }
  status.textContent = `Connected to ${apiUrl}: LangGraph server ${result.info.version || ""}`.trim();
  const answers = Object.entries(shown).filter(([id]) => !isStatus(id));
  window.chatResult = { ...result, shown: Object.fromEntries(answers.map(([k, v]) => [k, v.innerText])) };
  document.body.dataset.state = "done";
}

run().catch((error) => {
  status.textContent = String(error && error.message ? error.message : error);
  window.chatResult = { error: status.textContent };
  document.body.dataset.state = "error";
});
