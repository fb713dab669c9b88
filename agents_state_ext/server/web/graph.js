// The whole conversation as a collapsible tree: a run of single replies stays one list, every
// fork opens one collapsible branch per alternative; the active branch is highlighted.

import { h, fill, snippet } from "./dom.js";
import { statusWord } from "./model.js";

/** Render `tree` into `body`; `go(node)` shows that node's branch. */
export function renderGraph(body, summary, tree, go, busy) {
  const onPath = new Set(tree.activePath().map((node) => node.id));
  const branches = tree.leaves().length;
  fill(summary, `Graph · ${tree.size} messages · ${branches} branch${branches === 1 ? "" : "es"}`);
  if (!tree.size) return fill(body, h("p", { class: "muted" }, "No messages yet."));
  return fill(body, forks(tree.roots(), tree, onPath, go, busy));
}

function item(node, tree, onPath, go, busy) {
  const classes = ["node", node.role, `status-${node.status}`];
  if (onPath.has(node.id)) classes.push("on-path");
  const leaf = node.id === tree.activeLeaf;
  if (leaf) classes.push("active-leaf");
  const status = node.status === "complete" ? "" : ` [${statusWord(node.status)}]`;
  return h(
    "li",
    { class: classes.join(" "), dataset: { id: node.id } },
    h(
      "button",
      {
        type: "button",
        "aria-current": leaf ? "true" : null,
        disabled: busy,
        title: onPath.has(node.id) ? "on the active branch" : "show this branch",
        onclick: () => go(node),
      },
      h("span", { class: "who" }, node.role),
      ` ${snippet(node.text, 48) || "(empty)"}${status}`,
    ),
  );
}

function chain(start, tree, onPath, go, busy) {
  const list = h("ul", { class: "chain" });
  for (let node = start; node;) {
    list.append(item(node, tree, onPath, go, busy));
    const kids = tree.children(node.id);
    if (kids.length === 1) {
      node = kids[0];
      continue;
    }
    if (kids.length > 1)
      list.append(h("li", { class: "fork" }, forks(kids, tree, onPath, go, busy)));
    break;
  }
  return list;
}

function forks(kids, tree, onPath, go, busy) {
  if (kids.length === 1) return chain(kids[0], tree, onPath, go, busy);
  return kids.map((kid, index) => {
    const active = onPath.has(kid.id);
    const kind = kid.role === "user" ? "version" : "answer";
    const status = kid.status === "complete" ? "" : ` · ${statusWord(kid.status)}`;
    return h(
      "details",
      { class: active ? "branch on-path" : "branch", open: active },
      h("summary", {}, `${kind} ${index + 1}/${kids.length}${status}${active ? " · active" : ""}`),
      chain(kid, tree, onPath, go, busy),
    );
  });
}
