#!/usr/bin/env node
// Checks Mermaid texts with Mermaid's own parser (the npm `mermaid` package).
//
// Usage:
//   node validate_mermaid.mjs FILE...        one Mermaid text per file
//   node validate_mermaid.mjs < texts.json   a JSON array of strings on stdin
//
// Prints one JSON object per input, one per line, in input order:
//   {"index":0,"source":"...","ok":true,"diagramType":"flowchart-v2",
//    "vertices":[{"id","type","text","display"}],"edges":[{"start","end","type","text","display"}]}
//   {"index":1,"source":"...","ok":false,"error":"Parse error on line 2: ..."}
// `text` is the label as Mermaid stores it (with its entity codes turned into
// HTML entities, as they end up in the SVG); `display` is what a reader sees.
// Exit status: 0 when every text parses, 1 when any does not, 2 on bad input.
//
// Mermaid sanitises labels with DOMPurify while parsing, and DOMPurify needs a
// DOM: jsdom provides one, so the real sanitiser runs, as it does in a browser.

import { readFile } from 'node:fs/promises';
import { JSDOM } from 'jsdom';

const { window } = new JSDOM('<!doctype html><html><head></head><body></body></html>');
globalThis.window = window;
globalThis.document = window.document;

// Keep stdout for results only: Mermaid's logger writes through console.*.
for (const level of ['log', 'info', 'debug', 'warn', 'trace']) {
  console[level] = (...args) => process.stderr.write(args.map(String).join(' ') + '\n');
}

const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', logLevel: 'fatal' });

// Mermaid replaces `#name;` / `#123;` codes with these markers before parsing and
// turns them into `&name;` / `&#123;` in the rendered SVG.
function decodeMarkers(text) {
  return String(text ?? '')
    .replaceAll('\uFB02\u00B0\u00B0', '&#')
    .replaceAll('\uFB02\u00B0', '&')
    .replaceAll('\u00B6\u00DF', ';');
}

const scratch = window.document.createElement('textarea');
function displayText(html) {
  scratch.innerHTML = html;
  return scratch.value;
}

async function check(text) {
  if (typeof text !== 'string') {
    return { ok: false, error: 'input is not a string' };
  }
  let parsed;
  try {
    parsed = await mermaid.parse(text);
  } catch (err) {
    return { ok: false, error: String(err?.message ?? err) };
  }
  if (!parsed) {
    return { ok: false, error: 'mermaid.parse returned no diagram' };
  }
  const result = { ok: true, diagramType: parsed.diagramType };
  const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
  const db = diagram.db;
  if (typeof db.getVertices === 'function' && typeof db.getEdges === 'function') {
    result.vertices = [...db.getVertices().values()].map((v) => {
      const label = decodeMarkers(v.text);
      return { id: v.id, type: v.type ?? null, text: label, display: displayText(label) };
    });
    result.edges = db.getEdges().map((e) => {
      const label = decodeMarkers(e.text);
      return { start: e.start, end: e.end, type: e.type ?? null, text: label, display: displayText(label) };
    });
  }
  return result;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

async function loadInputs(argv) {
  if (argv.length > 0) {
    const items = [];
    for (const path of argv) items.push({ source: path, text: await readFile(path, 'utf8') });
    return items;
  }
  const raw = await readStdin();
  let data;
  try {
    data = JSON.parse(raw);
  } catch (err) {
    throw new Error(`stdin is not JSON: ${err.message}`);
  }
  if (!Array.isArray(data)) throw new Error('stdin must hold a JSON array of strings');
  return data.map((text, i) => ({ source: `stdin[${i}]`, text }));
}

let inputs;
try {
  inputs = await loadInputs(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`validate_mermaid: ${err.message}\n`);
  process.exit(2);
}

let failed = 0;
for (const [index, { source, text }] of inputs.entries()) {
  const result = await check(text);
  if (!result.ok) failed += 1;
  process.stdout.write(JSON.stringify({ index, source, ...result }) + '\n');
}
process.stderr.write(`validate_mermaid: ${inputs.length - failed} ok, ${failed} failed\n`);
process.exitCode = failed ? 1 : 0;
