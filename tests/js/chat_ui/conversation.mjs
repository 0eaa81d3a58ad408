// A conversation as Agent Chat UI holds one, with the published LangGraph SDK: the server's /info (the UI's
// connection check), a new thread, then each turn as a human message streamed with the UI's stream modes,
// then the thread list the UI's history shows. Shared by the Node check (client.mjs) and the browser page.

/** The text of a message's content: a string, or its text blocks joined (as the UI shows content). */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block) => block && block.type === "text")
    .map((block) => block.text)
    .join(" ");
}

/** What a chat history lists a thread as: its title, else its first message's words, else its id. */
export function threadLabel(thread) {
  const title = thread.metadata && thread.metadata.title;
  if (title) return String(title);
  const messages = (thread.values && thread.values.messages) || [];
  return (messages.length && contentText(messages[0].content)) || thread.thread_id;
}

/** True for a step's status message (its id starts with `status-`): shown while the step runs, never kept. */
export function isStatus(id) {
  return typeof id === "string" && id.startsWith("status-");
}

/**
 * Run the turns on one new thread. `turns`: the content of each human message. `onToken(id, text)` gets the
 * AI message's text so far as its tokens arrive (the streamed message's id), `onValues(values)` each state the
 * run streams. Returns, per turn, the streamed answers' and statuses' text by message id and the thread's
 * values at the end; and the server's info and the listed threads.
 */
export async function converse(client, { apiUrl, assistant, turns, onToken, onValues, onHuman, fetchImpl }) {
  const info = await (fetchImpl || fetch)(`${apiUrl}/info`);
  if (!info.ok) throw new Error(`Failed to connect to LangGraph server: /info answered ${info.status}`);
  const thread = await client.threads.create({ metadata: {} });
  const out = [];
  for (const content of turns) {
    if (onHuman) onHuman(content);
    const streamed = {};
    const statuses = {};
    const errors = [];
    let values = {};
    const nodes = new Set();
    for await (const part of client.runs.stream(thread.thread_id, assistant, {
      input: { messages: [{ type: "human", content }] },
      streamMode: ["values", "messages-tuple"],
      streamSubgraphs: true,
      streamResumable: true,
      onDisconnect: "continue",
    })) {
      const event = part.event.split("|")[0];
      if (event === "messages") {
        const [chunk, meta] = part.data;
        if (chunk.type !== "AIMessageChunk" && chunk.type !== "ai") continue;
        const into = isStatus(chunk.id) ? statuses : streamed;
        if (into === streamed) nodes.add(meta && meta.langgraph_node);
        into[chunk.id] = (into[chunk.id] || "") + contentText(chunk.content);
        if (onToken) onToken(chunk.id, into[chunk.id]);
      } else if (event === "values") {
        values = part.data;
        if (onValues) onValues(values);
      } else if (event === "error") {
        errors.push(part.data);
      }
    }
    out.push({ streamed, statuses, values, errors, nodes: [...nodes] });
  }
  const listed = await client.threads.search({ metadata: { graph_id: assistant }, limit: 100 });
  return {
    info: await info.json(),
    thread_id: thread.thread_id,
    turns: out,
    history: listed.map((t) => ({ thread_id: t.thread_id, label: threadLabel(t), metadata: t.metadata })),
  };
}
