// What the page reads out of the API's data: the tree as a graph, statuses as words, and for
// an answer which messages went into its request and why the others did not.

const SERVER_OWNED = new Set(["previous_response", "conversation"]);

/** The conversation's nodes (GET …/tree) indexed: by id, children by parent, in order. */
export class Tree {
  constructor(nodes = [], activeLeaf = null) {
    this.activeLeaf = activeLeaf;
    this.byId = new Map(nodes.map((node) => [node.id, node]));
    this.kids = new Map();
    for (const node of nodes) {
      const key = node.parent_id ?? "";
      if (!this.kids.has(key)) this.kids.set(key, []);
      this.kids.get(key).push(node);
    }
  }

  get(id) {
    return this.byId.get(id);
  }

  get size() {
    return this.byId.size;
  }

  children(id) {
    return this.kids.get(id ?? "") || [];
  }

  roots() {
    return this.children(null);
  }

  siblings(node) {
    return this.children(node.parent_id);
  }

  /** Root first, down to `id` itself. */
  pathTo(id) {
    const path = [];
    for (let node = this.get(id); node; node = this.get(node.parent_id)) path.unshift(node);
    return path;
  }

  /** The active branch, root first. */
  activePath() {
    return this.activeLeaf ? this.pathTo(this.activeLeaf) : [];
  }

  /** Where to go to show `id`: the newest leaf under it (itself when it has no children). */
  newestLeaf(id) {
    let node = this.get(id);
    for (let kids = this.children(node.id); kids.length; kids = this.children(node.id)) {
      node = kids[kids.length - 1];
    }
    return node.id;
  }

  /** Leaves: one per branch. */
  leaves() {
    return [...this.byId.values()].filter((node) => !this.children(node.id).length);
  }
}

const WORDS = {
  queued: "queued",
  streaming: "streaming",
  awaiting_approval: "awaiting approval",
  complete: "complete",
  cancelled: "stopped",
  failed: "failed",
  invalid: "invalid",
};

/** A status as the page says it (`cancelled` is "stopped": the user pressed stop). */
export function statusWord(status) {
  return WORDS[status] || status;
}

/** The status a node had before an edit made it invalid (its own status otherwise). */
export function statusThen(node) {
  return node.status === "invalid" ? node.meta?.status_before_invalid || "complete" : node.status;
}

/** Why an invalid node is invalid, in a sentence (the edit that replaced its branch). */
export function invalidReason(node, tree) {
  const by = tree.get(node.meta?.invalidated_by);
  const was = statusWord(statusThen(node));
  const edited = by ? `“${by.text}”` : "a newer version";
  return `Invalid: an earlier message of this branch was edited (now ${edited}). Kept as history; it was ${was}.`;
}

/** Whether `status` is an attempt still running (or waiting) on the server. */
export function inFlight(status) {
  return status === "queued" || status === "streaming" || status === "awaiting_approval";
}

/**
 * What went into the request of `answer` (an assistant node), from its attempt record:
 * `sent` [{id, node, tokens}] in the order sent, and every other message of its branch as
 * `skipped` [{id, node, kind, reason}], kind one of `budget` (a complete turn left out to stay
 * within the budget), `incomplete` (a stopped, failed or unfinished turn: never sent),
 * `server` (the server holds it: the request continued from the cursor) or `other`.
 */
export function contextOf(answer, record, tree) {
  const branch = tree.pathTo(answer.parent_id);
  const included = Object.entries(record.included || {});
  const sentIds = new Set(included.map(([id]) => id));
  const sent = included.map(([id, tokens]) => ({ id, tokens, node: tree.get(id) }));
  const serverHeld = SERVER_OWNED.has(record.state_owner) && Boolean(record.cursor_before);
  const skipped = [];
  branch.forEach((node, index) => {
    if (sentIds.has(node.id)) return;
    const next = branch[index + 1];
    const then = statusThen(node);
    let kind;
    let reason;
    if (then !== "complete") {
      kind = "incomplete";
      reason = `a ${statusWord(then)} answer is never sent`;
    } else if (node.role === "user" && next && statusThen(next) !== "complete") {
      kind = "incomplete";
      reason = `its answer was ${statusWord(statusThen(next))}: only complete turns are sent`;
    } else if (serverHeld) {
      kind = "server";
      reason = "held by the server: the request continued from the cursor";
    } else if (record.budget !== null && record.budget !== undefined) {
      kind = "budget";
      reason = "skipped to stay within the token budget";
    } else {
      kind = "other";
      reason = "not sent";
    }
    skipped.push({ id: node.id, node, kind, reason });
  });
  return { sent, skipped };
}
