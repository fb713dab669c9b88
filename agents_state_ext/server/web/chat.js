// The chat: the active branch as messages, each with its status, its alternatives "< k/n >"
// and its actions (edit a user message in place; retry an answer, show its details).

import { h, fill } from "./dom.js";
import { inFlight, invalidReason, statusThen, statusWord } from "./model.js";

const ROLES = { user: "You", assistant: "Assistant", system: "System" };

/**
 * Render the messages of `state` into `list`. `on` holds the actions: navigate(node, step),
 * edit(node), saveEdit(node, text), cancelEdit(node), retry(userId), select(node), and
 * draftFor(node) (an edit to offer again, or null).
 */
export function renderMessages(list, state, on) {
  const { tree, live } = state;
  const path = tree.activePath();
  const shown = new Set(path.map((node) => node.id));
  const items = path.map((node) => message(node, state, on));
  if (live && live.pendingUser && !shown.has(live.userId)) {
    items.push(pending("user", live.pendingUser));
  }
  if (live && !shown.has(live.messageId)) items.push(liveAnswer(live));
  fill(list, items);
}

function pending(role, text) {
  return h(
    "li",
    { class: `msg ${role} pending` },
    h("div", { class: "msg-head" }, h("span", { class: "role" }, ROLES[role])),
    h("div", { class: "msg-text" }, text),
  );
}

function liveAnswer(live) {
  return h(
    "li",
    { class: "msg assistant live", "aria-busy": "true", dataset: { id: live.messageId || "" } },
    h(
      "div",
      { class: "msg-head" },
      h("span", { class: "role" }, ROLES.assistant),
      badge(live.status || "queued"),
    ),
    h("div", { class: "msg-text" }, live.text),
    tools(live.tools),
  );
}

function badge(status) {
  if (status === "complete") return null;
  return h("span", { class: `badge status-${status}` }, statusWord(status));
}

function siblingNav(node, tree, state, on) {
  if (node.siblings < 2) return null;
  const busy = Boolean(state.live);
  const kind = node.role === "user" ? "version" : "answer";
  const key = node.parent_id || "root";
  const position = node.sibling_index + 1;
  return h(
    "span",
    { class: "siblings", role: "group", "aria-label": `${kind}s of this message` },
    h(
      "button",
      {
        type: "button",
        class: "nav prev",
        "aria-label": `Previous ${kind}`,
        dataset: { key: `${key}:prev` },
        disabled: busy || position === 1,
        onclick: () => on.navigate(node, -1),
      },
      "‹",
    ),
    h(
      "span",
      { class: "pos", "aria-label": `${kind} ${position} of ${node.siblings}` },
      `${position}/${node.siblings}`,
    ),
    h(
      "button",
      {
        type: "button",
        class: "nav next",
        "aria-label": `Next ${kind}`,
        dataset: { key: `${key}:next` },
        disabled: busy || position === node.siblings,
        onclick: () => on.navigate(node, +1),
      },
      "›",
    ),
  );
}

function tools(entries) {
  if (!entries || !entries.length) return null;
  return h(
    "ul",
    { class: "tools" },
    entries.map((line) => h("li", {}, line)),
  );
}

/** The tool calls and outputs an answer's items hold, one line each. */
function toolLines(node) {
  const lines = [];
  for (const item of node.items || []) {
    if (item.type === "function_call")
      lines.push(`tool call ${item.name}(${item.arguments || ""})`);
    else if (item.type === "function_call_output") {
      lines.push(
        `tool result: ${typeof item.output === "string" ? item.output : JSON.stringify(item.output)}`,
      );
    }
  }
  return lines;
}

function note(node, state) {
  const { tree, records } = state;
  if (node.status === "invalid") return invalidReason(node, tree);
  if (node.status === "cancelled") return "Stopped: the partial answer is kept.";
  if (node.status === "failed") {
    const record = records.get(node.attempt_id);
    const overflow =
      record && record.overflow ? " The request was over the token budget and was not sent." : "";
    return `Failed: ${node.meta?.error || record?.error || "the model call failed"}.${overflow}`;
  }
  if (node.status === "awaiting_approval") {
    return "Waiting for a tool call to be approved (decide with the approvals API; stop drops it).";
  }
  if (inFlight(node.status) && !(state.live && state.live.messageId === node.id)) {
    return "Still running on the server (started elsewhere): reload to see its end, or stop it.";
  }
  return null;
}

function message(node, state, on) {
  const { tree, live, selected, editing } = state;
  const isLive = live && live.messageId === node.id;
  const text = isLive ? live.text : node.text;
  const status = isLive ? live.status || node.status : node.status;
  const classes = ["msg", node.role, `status-${status}`];
  if (node.status === "invalid") classes.push("invalid");
  if (node.id === selected) classes.push("selected");
  if (isLive) classes.push("live");
  const busy = Boolean(live);
  // The messages shown are the active branch: an edited-away version the person went back
  // to goes on (edit, retry, answer) unless its attempt was still running when replaced.
  const valid = node.status !== "invalid" || !inFlight(statusThen(node));

  let body;
  if (editing === node.id) {
    body = editor(node, on);
  } else {
    body = h("div", { class: "msg-text" }, text);
  }

  const actions = [];
  if (node.role === "user" && editing !== node.id) {
    actions.push(
      h(
        "button",
        {
          type: "button",
          class: "edit",
          dataset: { key: `${node.parent_id || "root"}:edit` },
          disabled: busy || !valid,
          onclick: () => on.edit(node),
        },
        "Edit",
      ),
    );
    if (node.id === tree.activeLeaf && valid) {
      actions.push(
        h(
          "button",
          { type: "button", class: "retry", disabled: busy, onclick: () => on.retry(node.id) },
          "Answer",
        ),
      );
    }
  }
  if (node.role === "assistant") {
    actions.push(
      h(
        "button",
        {
          type: "button",
          class: "retry",
          dataset: { key: `${node.parent_id}:retry` },
          disabled: busy || !valid || inFlight(node.status),
          onclick: () => on.retry(node.parent_id),
        },
        "Retry",
      ),
      h(
        "button",
        {
          type: "button",
          class: "details",
          dataset: { key: `${node.parent_id}:details` },
          "aria-pressed": node.id === selected ? "true" : "false",
          onclick: () => on.select(node),
        },
        "Details",
      ),
    );
  }

  const why = isLive ? null : note(node, state);
  return h(
    "li",
    {
      class: classes.join(" "),
      dataset: { id: node.id },
      "aria-busy": isLive ? "true" : null,
    },
    h(
      "div",
      { class: "msg-head" },
      h("span", { class: "role" }, ROLES[node.role] || node.role),
      badge(status),
      siblingNav(node, tree, state, on),
    ),
    body,
    tools(isLive ? live.tools : toolLines(node)),
    why ? h("p", { class: "reason" }, why) : null,
    actions.length ? h("div", { class: "msg-actions" }, actions) : null,
  );
}

function editor(node, on) {
  const area = h("textarea", {
    class: "edit-input",
    rows: 3,
    "aria-label": "Edit the message",
    dataset: { key: `${node.parent_id || "root"}:editor` },
  });
  area.value = on.draftFor(node) ?? node.text;
  const save = () => {
    if (area.value.trim()) on.saveEdit(node, area.value);
  };
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      save();
    } else if (event.key === "Escape") {
      event.preventDefault();
      on.cancelEdit(node);
    }
  });
  return h(
    "div",
    { class: "editor" },
    area,
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", class: "save", onclick: save }, "Save and answer"),
      h(
        "button",
        { type: "button", class: "cancel", onclick: () => on.cancelEdit(node) },
        "Cancel",
      ),
    ),
  );
}
