// The inspector's panels for the selected answer: its context (what was sent, what was
// skipped and why, tokens of the budget, overflow, cursors), its attempt record, and
// explain(a, b) between two attempts as a readable diff.

import { h, fill, snippet, shortId, when } from "./dom.js";
import { contextOf, statusWord } from "./model.js";

const ROLE = { user: "user", assistant: "assistant", system: "system" };

function messageLine(id, node, extra) {
  const role = node ? ROLE[node.role] || node.role : "message";
  const text = node ? `“${snippet(node.text, 70)}”` : `(not in this conversation: ${shortId(id)})`;
  return h(
    "li",
    { dataset: { id } },
    h("span", { class: "who" }, role),
    " ",
    h("span", { class: "what" }, text),
    extra ? [" ", h("span", { class: "extra" }, extra)] : null,
  );
}

function cursor(value) {
  return value ? h("code", {}, value) : h("span", { class: "muted" }, "none");
}

/** The context panel of `answer` (an assistant node) with its `record`. */
export function renderContext(body, answer, record, tree) {
  if (!answer)
    return fill(body, h("p", { class: "muted" }, "Select an answer to see what was sent."));
  if (!record)
    return fill(body, h("p", { class: "muted" }, "This answer has no attempt record yet."));
  const { sent, skipped } = contextOf(answer, record, tree);
  const budgetSkipped = skipped.filter((entry) => entry.kind === "budget");
  const otherSkipped = skipped.filter((entry) => entry.kind !== "budget");
  const used = record.used ?? 0;
  const budget = record.budget;
  const meter =
    budget !== null && budget !== undefined
      ? h("meter", {
          min: 0,
          max: budget,
          high: budget * 0.9,
          optimum: 0,
          value: Math.min(used, budget),
          "aria-label": "tokens used of the budget",
        })
      : null;
  return fill(
    body,
    h(
      "p",
      { class: "context-of" },
      "Answer ",
      h("code", {}, shortId(answer.id)),
      ` · ${statusWord(record.status)}`,
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Tokens"),
      h(
        "dd",
        { class: "tokens" },
        budget !== null && budget !== undefined ? `${used} of ${budget}` : `${used} (no budget)`,
        meter ? [" ", meter] : null,
      ),
      h("dt", {}, "Overflow"),
      h(
        "dd",
        { class: record.overflow ? "overflow yes" : "overflow no" },
        record.overflow ? "yes: over the budget, nothing was sent" : "no",
      ),
      h("dt", {}, "Cursor before"),
      h("dd", { class: "cursor-before" }, cursor(record.cursor_before)),
      h("dt", {}, "Cursor after"),
      h("dd", { class: "cursor-after" }, cursor(record.cursor_after)),
      h("dt", {}, "Owner"),
      h("dd", {}, record.state_owner || "—"),
    ),
    h(
      "h3",
      {},
      record.overflow ? `Would have been sent (${sent.length})` : `Sent (${sent.length})`,
    ),
    sent.length
      ? h(
          "ol",
          { class: "sent" },
          sent.map(({ id, node, tokens }) => messageLine(id, node, `${tokens} tokens`)),
        )
      : h("p", { class: "muted" }, "nothing"),
    h("h3", {}, `Skipped for the budget (${budgetSkipped.length})`),
    budgetSkipped.length
      ? h(
          "ul",
          { class: "skipped budget" },
          budgetSkipped.map(({ id, node }) => messageLine(id, node)),
        )
      : h("p", { class: "muted" }, "nothing"),
    otherSkipped.length
      ? [
          h("h3", {}, `Not sent for another reason (${otherSkipped.length})`),
          h(
            "ul",
            { class: "skipped other" },
            otherSkipped.map(({ id, node, reason }) => messageLine(id, node, `— ${reason}`)),
          ),
        ]
      : null,
  );
}

function usageText(usage) {
  if (!usage || !Object.keys(usage).length) return "—";
  return Object.entries(usage)
    .map(([key, value]) => `${key.replace(/_/g, " ")} ${value}`)
    .join(" · ");
}

function pairs(object) {
  const entries = Object.entries(object || {});
  return entries.length
    ? entries.map(([key, value]) => `${key}=${JSON.stringify(value)}`).join(", ")
    : "—";
}

/** The attempt record of the selected answer, every field. */
export function renderRecord(body, record) {
  if (!record) return fill(body, h("p", { class: "muted" }, "No answer selected."));
  const seconds =
    record.started_at && record.finished_at
      ? `${(record.finished_at - record.started_at).toFixed(2)} s`
      : "—";
  const rows = [
    ["attempt", record.attempt_id],
    ["message", record.message_id],
    ["answers", record.parent_user_id],
    ["request", record.request_id],
    ["server request", record.server_request_id || "—"],
    [
      "status",
      record.invalidated_by
        ? `${statusWord(record.status)} · invalid (edit ${record.invalidated_by}, ${when(record.invalidated_at)})`
        : statusWord(record.status),
    ],
    ["error", record.error || "—"],
    ["model", record.model || "—"],
    ["prompt version", record.prompt_version || "—"],
    ["sampling", pairs(record.sampling)],
    ["owner", record.state_owner || "—"],
    ["budget", record.budget ?? "none"],
    ["used", record.exact === false ? `${record.used ?? "—"} (estimated)` : record.used ?? "—"],
    ["overflow", record.overflow ? "yes" : "no"],
    ["included", `${Object.keys(record.included || {}).length} messages`],
    ["sent", record.sent ? `${record.sent.length} messages` : "—"],
    ["instructions", record.instructions || "—"],
    ["tools", record.tools || "—"],
    ["request digest", record.request_digest || "—"],
    ["replay of", record.replay_of || "—"],
    ["imported from", record.imported_from || "—"],
    ["cursor before", record.cursor_before || "—"],
    ["cursor after", record.cursor_after || "—"],
    ["reseeded from", record.reseeded_from || "—"],
    ["response", record.response_id || "—"],
    ["usage", usageText(record.usage)],
    [
      "approvals",
      record.approvals && record.approvals.length
        ? `${record.approvals.length} tool calls`
        : "none",
    ],
    ["started", when(record.started_at)],
    ["finished", when(record.finished_at)],
    ["took", seconds],
  ];
  return fill(
    body,
    h(
      "dl",
      { class: "record" },
      rows.map(([name, value]) => [
        h("dt", {}, name),
        h("dd", { dataset: { field: name } }, String(value)),
      ]),
    ),
    h(
      "details",
      { class: "raw" },
      h("summary", {}, "As JSON"),
      h("pre", {}, JSON.stringify(record, null, 2)),
    ),
  );
}

/** The options of the explain form: every attempt, labelled by its answer. */
export function attemptLabel(record, index, tree) {
  const node = tree.get(record.message_id);
  const user = tree.get(record.parent_user_id);
  const answer = node && node.text ? `“${snippet(node.text, 32)}”` : "(no text)";
  const question = user ? ` to “${snippet(user.text, 24)}”` : "";
  return `#${index + 1} ${statusWord(record.status)}${question}: ${answer}`;
}

function change(value, tree) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "none");
  const node = typeof value === "string" ? tree.get(value) : null;
  if (node) return h("span", { title: value }, `${node.role} “${snippet(node.text, 40)}”`);
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// The diff's fields that are not one value changed: every other field is a [first, second]
// pair when the two attempts differ in it (the server decides which fields exist).
const NOT_SCALAR = new Set(["first", "second", "sampling", "added", "removed", "retokenized"]);

/** explain(a, b) as tables and lists: what differed in what the two attempts were sent. */
export function renderDiff(body, diff, labels, tree) {
  const rows = [];
  for (const [name, pair] of Object.entries(diff)) {
    if (!NOT_SCALAR.has(name) && Array.isArray(pair))
      rows.push([name.replace(/_/g, " "), pair[0], pair[1]]);
  }
  for (const [key, pair] of Object.entries(diff.sampling || {}))
    rows.push([`sampling ${key}`, pair[0], pair[1]]);
  const line =
    (sign, cls) =>
    ([id, tokens]) => {
      const node = tree.get(id);
      const extra = Array.isArray(tokens)
        ? `${tokens[0]} → ${tokens[1]} tokens`
        : `${tokens} tokens`;
      const item = messageLine(id, node, extra);
      item.classList.add(cls);
      item.prepend(h("span", { class: "sign", "aria-hidden": "true" }, sign));
      return item;
    };
  const removed = Object.entries(diff.removed || {});
  const added = Object.entries(diff.added || {});
  const retokenized = Object.entries(diff.retokenized || {});
  const count = rows.length + removed.length + added.length + retokenized.length;
  return fill(
    body,
    h(
      "p",
      { class: "diff-summary" },
      diff.differs
        ? `${count} difference${count === 1 ? "" : "s"} in what was sent`
        : "Nothing sent differed",
    ),
    h(
      "p",
      { class: "diff-sides" },
      h("strong", {}, "A: "),
      labels[0],
      h("br"),
      h("strong", {}, "B: "),
      labels[1],
    ),
    rows.length
      ? h(
          "table",
          { class: "diff-fields" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "field"),
              h("th", { scope: "col" }, "A"),
              h("th", { scope: "col" }, "B"),
            ),
          ),
          h(
            "tbody",
            {},
            rows.map(([name, a, b]) =>
              h(
                "tr",
                {},
                h("th", { scope: "row" }, name),
                h("td", {}, change(a, tree)),
                h("td", {}, change(b, tree)),
              ),
            ),
          ),
        )
      : null,
    removed.length
      ? [
          h("h3", {}, "Only A was sent"),
          h("ul", { class: "diff-removed" }, removed.map(line("−", "removed"))),
        ]
      : null,
    added.length
      ? [
          h("h3", {}, "Only B was sent"),
          h("ul", { class: "diff-added" }, added.map(line("+", "added"))),
        ]
      : null,
    retokenized.length
      ? [
          h("h3", {}, "Counted differently"),
          h("ul", { class: "diff-retokenized" }, retokenized.map(line("~", "retokenized"))),
        ]
      : null,
    h("details", { class: "raw" }, h("summary", {}, "As text"), h("pre", {}, diff.text)),
  );
}
