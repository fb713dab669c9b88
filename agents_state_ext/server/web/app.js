// The page: conversations, the chat with streamed answers, and the inspector, all over the
// API beside it. Every failure is shown as a message in #alerts, never as a blank page.

import { ApiError, access, api } from "./api.js";
import { renderMessages } from "./chat.js";
import { h, fill, shortId, when } from "./dom.js";
import { renderGraph } from "./graph.js";
import { Tree, inFlight, statusThen, statusWord } from "./model.js";
import { attemptLabel, renderContext, renderDiff, renderRecord } from "./panels.js";

const $ = (id) => document.getElementById(id);

const state = {
  conversations: [],
  id: null, // the open conversation
  view: null, // GET /conversations/{id}: strategy, budget, cursor, active path
  tree: new Tree(),
  records: new Map(), // attempt id -> attempt record
  recordList: [],
  selected: null, // the assistant node the inspector shows
  editing: null, // the user node edited in place
  draft: null, // {id, text}: an edit the server refused, to offer again
  live: null, // the answer this page streams now
  explain: { a: null, b: null, forSelected: null },
};

// -- messages ----------------------------------------------------------------------------------

function say(text) {
  $("status").textContent = text;
}

function sentence(text) {
  return /[.!?)]$/.test(text) ? text : `${text}.`;
}

/** Show an error as a message (type, status and the server's words); it stays until dismissed. */
function report(error) {
  const known = error instanceof ApiError;
  const title = known
    ? `${error.status ? `${error.status} ` : ""}${error.type}`
    : "Error in the page";
  const hint =
    known && error.status === 401
      ? " Give your token under Access."
      : known && error.status === 409
        ? " Try again once it is done."
        : "";
  const box = $("alerts");
  const alert = h(
    "div",
    { class: "alert", role: "alert" },
    h("strong", {}, title),
    " ",
    h(
      "span",
      { class: "alert-text" },
      `${sentence(String(error.message || error))}${hint}`,
      overBudget(error),
    ),
    h(
      "button",
      {
        type: "button",
        class: "dismiss",
        "aria-label": "Dismiss this message",
        onclick: () => alert.remove(),
      },
      "×",
    ),
  );
  box.append(alert);
  while (box.children.length > 4) box.firstElementChild.remove();
  if (known && error.status === 401) openAccess(true);
}

/**
 * For a 422 over the token budget (nothing was stored: the text is back in the box), the way
 * on: a button that raises the conversation's budget to what the message needs.
 */
function overBudget(error) {
  const counts = error instanceof ApiError && error.status === 422 ? error.details : null;
  if (!counts || !Number.isInteger(counts.required_tokens) || !state.id) return null;
  const id = state.id;
  const need = counts.required_tokens;
  return h(
    "span",
    { class: "alert-way" },
    ` Needed: ${need} tokens (the message alone: ${counts.message_tokens ?? "?"}), budget ${counts.budget}. Shorten the message, or `,
    h(
      "button",
      {
        type: "button",
        class: "raise-budget",
        onclick: async (event) => {
          event.target.disabled = true;
          try {
            await api.setBudget(id, need);
            say(`Budget raised to ${need} tokens: send again.`);
            event.target.closest(".alert")?.remove();
            if (state.id === id) await refresh();
            $("composer-input").focus();
          } catch (failed) {
            event.target.disabled = false;
            report(failed);
          }
        },
      },
      `raise the budget to ${need}`,
    ),
    ".",
  );
}

window.addEventListener("error", (event) => report(event.error || new Error(event.message)));
window.addEventListener("unhandledrejection", (event) =>
  report(event.reason || new Error("unknown failure")),
);

// -- loading -----------------------------------------------------------------------------------

let generation = 0;

/** Read the open conversation again (its view, tree and records) and render it. */
async function refresh() {
  const id = state.id;
  if (!id) return render();
  const mine = ++generation;
  try {
    const [view, tree, attempts] = await Promise.all([
      api.show(id),
      api.tree(id),
      api.attempts(id),
    ]);
    if (mine !== generation || id !== state.id) return;
    state.view = view;
    state.tree = new Tree(tree.nodes, tree.active_leaf);
    state.recordList = attempts.attempts;
    state.records = new Map(attempts.attempts.map((record) => [record.attempt_id, record]));
    keepSelection();
  } catch (error) {
    if (mine !== generation) return;
    report(error);
    if (error.status === 404 && id === state.id) return open(null); // deleted, or not yours
  }
  render();
}

function keepSelection() {
  const path = state.tree.activePath();
  const onPath = (id) => path.some((node) => node.id === id);
  if (state.selected && onPath(state.selected)) return;
  const answers = path.filter((node) => node.role === "assistant");
  state.selected = answers.length ? answers[answers.length - 1].id : null;
}

async function loadConversations() {
  try {
    state.conversations = (await api.list()).conversations;
  } catch (error) {
    report(error);
  }
  renderConversations();
}

function open(id) {
  if (state.live) state.live.controller.abort(); // stop reading; the answer goes on on the server
  state.live = null;
  state.id = id;
  state.view = null;
  state.tree = new Tree();
  state.records = new Map();
  state.recordList = [];
  state.selected = null;
  state.editing = null;
  state.draft = null;
  state.explain = { a: null, b: null, forSelected: null };
  fill($("explain-body"));
  const hash = id ? `#c=${encodeURIComponent(id)}` : "";
  if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname);
  renderConversations();
  render();
  return refresh();
}

// -- answering ---------------------------------------------------------------------------------

/** Start an answer (`messages`, `retry` or `edit`) and read its stream into the page. */
async function answer(action, body, pendingUser = null) {
  const id = state.id;
  const controller = new AbortController();
  const live = {
    action,
    messageId: null,
    userId: null,
    text: "",
    tools: [],
    status: "queued",
    pendingUser,
    controller,
  };
  state.live = live;
  state.editing = null;
  say("Sending…");
  render();
  let ending = null;
  try {
    for await (const { event, data } of api.answer(id, action, body, controller.signal)) {
      if (state.live !== live) break;
      if (event === "attempt") {
        live.status = data.status;
        if (!live.messageId) {
          live.messageId = data.message_id;
          live.userId = data.user_id;
          state.selected = data.message_id;
          refresh(); // the stored start: the new messages take their place in the branch
        }
        say(
          live.status === "streaming"
            ? "The answer is streaming…"
            : `Answer ${statusWord(live.status)}`,
        );
      } else if (event === "delta") {
        live.text += data.text;
        live.status = "streaming";
      } else if (event === "tool_call") {
        live.tools.push(`tool call ${data.name}(${data.arguments || ""})`);
      } else if (event === "tool_result") {
        live.tools.push(
          `tool result: ${typeof data.output === "string" ? data.output : JSON.stringify(data.output)}`,
        );
      } else if (event === "record") {
        ending = data.status;
      } else if (event === "error") {
        ending = "failed";
        report(new ApiError(data.status, data.type, data.message));
      }
      renderLive();
    }
  } catch (error) {
    if (error.name !== "AbortError") {
      report(error);
      ending = "refused";
    }
  } finally {
    if (state.live === live) state.live = null;
  }
  if (ending === "refused") keepDraft(action, body);
  if (ending === "cancelled") say("Stopped: the partial answer is kept.");
  else if (ending === "complete") say("Answer complete.");
  else if (ending === "failed") say("The answer failed.");
  else if (ending === "refused") say("Not sent.");
  if (state.id === id) await refresh();
  if (document.activeElement === document.body && !$("composer-input").disabled)
    $("composer-input").focus();
  if (state.id === id) loadConversations();
}

/** A refused message is not lost: back in the message box, or the edit opens again. */
function keepDraft(action, body) {
  if (action === "messages" && !$("composer-input").value) $("composer-input").value = body.content;
  if (action === "edit" && state.tree.get(body.user_id)) {
    state.editing = body.user_id;
    state.draft = { id: body.user_id, text: body.content };
  }
}

/** Update only the streaming answer (focus and everything else stay as they are). */
function renderLive() {
  const live = state.live;
  if (!live) return;
  const item = live.messageId
    ? document.querySelector(`#messages li[data-id="${CSS.escape(live.messageId)}"]`)
    : document.querySelector("#messages li.live");
  if (!item) return render();
  item.querySelector(".msg-text").textContent = live.text;
  const badge = item.querySelector(".badge");
  if (badge) {
    badge.textContent = statusWord(live.status);
    badge.className = `badge status-${live.status}`;
  }
  let tools = item.querySelector(".tools");
  if (live.tools.length) {
    if (!tools) {
      tools = h("ul", { class: "tools" });
      item.querySelector(".msg-text").after(tools);
    }
    fill(
      tools,
      live.tools.map((line) => h("li", {}, line)),
    );
  }
  renderComposer();
}

async function stop() {
  const id = state.id;
  if (state.live) state.live.stopping = true;
  say("Stopping…");
  renderComposer();
  try {
    const record = await api.stop(id);
    say(`Stopped: the answer is ${statusWord(record.status)}.`);
  } catch (error) {
    report(error);
  }
  if (!state.live) await refresh();
}

// -- actions on messages -----------------------------------------------------------------------

const actions = {
  async navigate(node, step) {
    const siblings = state.tree.siblings(node);
    const target = siblings[siblings.findIndex((s) => s.id === node.id) + step];
    if (target) await switchTo(target);
  },
  edit(node) {
    state.editing = node.id;
    render();
    const area = document.querySelector(`#messages li[data-id="${CSS.escape(node.id)}"] textarea`);
    if (area) area.focus();
  },
  saveEdit(node, text) {
    state.draft = null;
    answer("edit", { user_id: node.id, content: text });
  },
  cancelEdit(node) {
    state.editing = null;
    state.draft = null;
    render();
    const button = document.querySelector(
      `[data-key="${CSS.escape(`${node.parent_id || "root"}:edit`)}"]`,
    );
    if (button) button.focus();
  },
  retry(userId) {
    answer("retry", { user_id: userId });
  },
  select(node) {
    state.selected = node.id;
    render();
  },
  draftFor(node) {
    return state.draft && state.draft.id === node.id ? state.draft.text : null;
  },
};

/** Show the branch through `node` (its newest leaf becomes the active one). */
async function switchTo(node) {
  try {
    await api.switchTo(state.id, state.tree.newestLeaf(node.id));
  } catch (error) {
    report(error);
  }
  await refresh();
}

// -- rendering ---------------------------------------------------------------------------------

// Keyboard users keep their place: a re-rendered control gets the focus back (keys name a
// control by its place, e.g. "<user message>:retry", so the new answer's Retry takes it);
// one disabled meanwhile (while an answer streams) gets it once it is enabled again.
let pendingFocus = null;
const PARTNER = { prev: "next", next: "prev" };

function render() {
  const active = document.activeElement;
  const key = active?.dataset?.key || (!active || active === document.body ? pendingFocus : null);
  renderHead();
  renderMessages($("messages"), state, actions);
  renderComposer();
  renderInspector();
  pendingFocus = null;
  if (!key) return;
  const [place, what] = [key.slice(0, key.lastIndexOf(":")), key.slice(key.lastIndexOf(":") + 1)];
  const candidates = [key, PARTNER[what] ? `${place}:${PARTNER[what]}` : null].filter(Boolean);
  for (const candidate of candidates) {
    const again = document.querySelector(`[data-key="${CSS.escape(candidate)}"]`);
    if (again && !again.disabled) {
      if (again !== document.activeElement) again.focus();
      return;
    }
  }
  if (!state.live && document.activeElement === document.body) return;
  pendingFocus = key;
}

function renderConversations() {
  const list = $("conversations");
  if (!state.conversations.length) {
    return fill(list, h("li", { class: "muted" }, "None yet: create one above."));
  }
  const sorted = [...state.conversations].sort((a, b) => (b.created_at || 0) - (a.created_at || 0));
  fill(
    list,
    sorted.map((conversation) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "conversation",
            "aria-current": conversation.id === state.id ? "page" : null,
            dataset: { id: conversation.id },
            onclick: () => open(conversation.id),
          },
          h("span", { class: "conv-when" }, when(conversation.created_at)),
          h(
            "span",
            { class: "conv-what" },
            `${conversation.strategy} · ${shortId(conversation.id)}`,
          ),
        ),
      ),
    ),
  );
}

function renderHead() {
  const view = state.view;
  $("refresh").hidden = !state.id;
  if (!state.id) return fill($("chat-title"), "No conversation selected: create one or pick one.");
  if (!view) return fill($("chat-title"), "Loading…");
  fill(
    $("chat-title"),
    h("span", { class: "conv-id", title: view.id }, shortId(view.id)),
    h("span", { class: "chip" }, view.strategy),
    h("span", { class: "chip" }, view.budget ? `budget ${view.budget} tokens` : "no budget"),
    h(
      "span",
      { class: "chip", title: "the server cursor the next answer continues from" },
      `cursor ${view.cursor ? shortId(view.cursor) : "none"}`,
    ),
  );
}

function renderComposer() {
  const input = $("composer-input");
  const leaf = state.tree.get(state.tree.activeLeaf);
  const live = state.live;
  const running = live || (leaf && leaf.role === "assistant" && inFlight(leaf.status));
  let blocked = null;
  let hint = null;
  if (!state.id) blocked = "Create or pick a conversation first.";
  else if (leaf && leaf.status === "invalid" && inFlight(statusThen(leaf))) {
    blocked =
      "This answer was replaced by an edit while it ran: retry its question, or go to the newest version (›).";
  } else if (leaf && leaf.role === "user")
    blocked = "This message has no answer yet: press Answer on it.";
  else if (leaf && leaf.status === "invalid") {
    hint =
      "This version was replaced by an edit (its messages stay marked invalid). Sending continues it from here, with its answers as context.";
  }
  input.disabled = Boolean(blocked) || !state.view;
  $("send").disabled = input.disabled || Boolean(running);
  $("stop").hidden = !running;
  $("stop").disabled = Boolean(live && live.stopping);
  const note = $("branch-note");
  note.hidden = !(blocked || hint) || !state.id;
  note.textContent = blocked || hint || "";
}

function answerOf(id) {
  const node = state.tree.get(id);
  return node && node.role === "assistant" ? node : null;
}

function renderInspector() {
  const answer = answerOf(state.selected);
  const record = answer ? state.records.get(answer.attempt_id) : null;
  renderContext($("context-body"), answer, record, state.tree);
  renderRecord($("record-body"), record);
  renderExplainForm(answer);
  renderGraph(
    $("graph-body"),
    $("graph-heading"),
    state.tree,
    (node) => switchTo(node),
    Boolean(state.live),
  );
}

/** Default pair: the selected answer (B) and another answer to the same message (A). */
function defaultPair(answer) {
  const list = state.recordList;
  if (!answer || !list.length)
    return [list[list.length - 2]?.attempt_id, list[list.length - 1]?.attempt_id];
  const b = answer.attempt_id;
  const siblings = state.tree
    .siblings(answer)
    .filter((node) => node.id !== answer.id && node.attempt_id);
  let a = siblings.length ? siblings[siblings.length - 1].attempt_id : null;
  if (!a) {
    const index = list.findIndex((record) => record.attempt_id === b);
    a = (list[index - 1] || list[index + 1])?.attempt_id || null;
  }
  return [a, b];
}

function renderExplainForm(answer) {
  const chosen = state.explain;
  if (chosen.forSelected !== (answer ? answer.id : null) || !state.records.has(chosen.b)) {
    [chosen.a, chosen.b] = defaultPair(answer);
    chosen.forSelected = answer ? answer.id : null;
  }
  for (const [select, value] of [
    [$("explain-a"), chosen.a],
    [$("explain-b"), chosen.b],
  ]) {
    fill(
      select,
      state.recordList.map((record, index) =>
        h(
          "option",
          { value: record.attempt_id, selected: record.attempt_id === value },
          attemptLabel(record, index, state.tree),
        ),
      ),
    );
    if (value) select.value = value;
  }
  $("explain-run").disabled = state.recordList.length < 2;
}

async function runExplain() {
  const a = $("explain-a").value;
  const b = $("explain-b").value;
  if (!a || !b) return;
  const labels = [
    $("explain-a").selectedOptions[0]?.textContent || a,
    $("explain-b").selectedOptions[0]?.textContent || b,
  ];
  try {
    const diff = await api.explain(state.id, a, b);
    renderDiff($("explain-body"), diff, labels, state.tree);
  } catch (error) {
    report(error);
  }
}

// -- wiring ------------------------------------------------------------------------------------

function openAccess(show) {
  $("access").hidden = !show;
  $("access-toggle").setAttribute("aria-expanded", String(show));
  if (show) {
    $("access-token").value = access.token;
    $("access-user").value = access.user;
    $("access-token").focus();
  }
}

function send() {
  const input = $("composer-input");
  const text = input.value;
  if (!text.trim() || $("send").disabled) return;
  input.value = "";
  answer("messages", { content: text }, text);
}

function wire() {
  $("access-toggle").addEventListener("click", () => openAccess($("access").hidden));
  $("access").addEventListener("submit", (event) => {
    event.preventDefault();
    access.save($("access-token").value.trim(), $("access-user").value.trim());
    openAccess(false);
    say("Access saved for this tab.");
    loadConversations();
    if (state.id) refresh();
  });
  $("access-forget").addEventListener("click", () => {
    access.save("", "");
    openAccess(false);
    say("Access forgotten.");
  });
  $("new-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const settings = {};
    const strategy = $("new-strategy").value;
    const budget = $("new-budget").value.trim();
    const system = $("new-system").value.trim();
    if (strategy) settings.strategy = strategy;
    if (budget) settings.budget = Number(budget);
    if (system) settings.system = system;
    try {
      const created = await api.create(settings);
      say(
        `Conversation created (${created.strategy}, ${created.budget ? `budget ${created.budget}` : "no budget"}).`,
      );
      await loadConversations();
      await open(created.id);
      $("composer-input").focus();
    } catch (error) {
      report(error);
    }
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("composer-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape" && !$("stop").hidden) {
      event.preventDefault();
      stop();
    }
  });
  $("stop").addEventListener("click", stop);
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    $("composer-input").focus();
  });
  $("refresh").addEventListener("click", refresh);
  $("explain-a").addEventListener("change", (event) => (state.explain.a = event.target.value));
  $("explain-b").addEventListener("change", (event) => (state.explain.b = event.target.value));
  $("explain-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runExplain();
  });
  if (window.matchMedia("(max-width: 720px)").matches) $("sidebar").open = false;
}

function fromHash() {
  const match = /^#c=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

wire();
render();
loadConversations();
const start = fromHash();
if (start) open(start);
window.addEventListener("hashchange", () => {
  const id = fromHash();
  if (id && id !== state.id) open(id);
});
