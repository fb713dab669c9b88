// Building the page's elements. Text always goes in as text (never as HTML): model answers
// and user messages cannot inject markup.

/**
 * h("button", {class: "x", onclick: f, "aria-label": "..."}, "text", child, ...)
 * Attributes: `class`, `dataset` (an object), `on<event>` (a function), booleans (set when
 * true, left out when false), anything else as an attribute; null / undefined are left out.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(element.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace everything inside `element` by `children`. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** The first `limit` characters of `text` on one line. */
export function snippet(text, limit = 60) {
  const line = String(text || "")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

/** The last 8 characters of an id: enough to tell ids apart on screen. */
export function shortId(id) {
  return id ? `…${String(id).slice(-8)}` : "—";
}

/** A Unix time in seconds as local date and time. */
export function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "—";
}
