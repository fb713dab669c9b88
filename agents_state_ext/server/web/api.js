// The chat API beside this page (/api, relative: the page works where the app is mounted):
// JSON calls, and answers read as Server-Sent Events from a POST (EventSource cannot POST).

const TOKEN_KEY = "agents-state-ext.token";
const USER_KEY = "agents-state-ext.user";
const BASE = new URL("api/", document.baseURI);

/** An error the page shows: the HTTP status (0: no answer), the error's type and message. */
export class ApiError extends Error {
  /** `details`: the whole error body (a 422 over the budget has its token counts there). */
  constructor(status, type, message, details = null) {
    super(message);
    this.status = status;
    this.type = type;
    this.details = details;
  }
}

/** The bearer token and user id, kept for this tab only. */
export const access = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  },
  get user() {
    return sessionStorage.getItem(USER_KEY) || "";
  },
  save(token, user) {
    for (const [key, value] of [
      [TOKEN_KEY, token],
      [USER_KEY, user],
    ]) {
      if (value) sessionStorage.setItem(key, value);
      else sessionStorage.removeItem(key);
    }
  },
};

function headers(withBody) {
  const found = { Accept: "application/json, text/event-stream" };
  if (withBody) found["Content-Type"] = "application/json";
  if (access.token) found.Authorization = `Bearer ${access.token}`;
  else if (access.user) found["X-User-Id"] = access.user;
  return found;
}

async function request(method, path, body, signal) {
  const withBody = body !== undefined;
  try {
    return await fetch(new URL(path, BASE), {
      method,
      headers: headers(withBody),
      body: withBody ? JSON.stringify(body) : undefined,
      cache: "no-store",
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "NetworkError", `the server did not answer (${error.message})`);
  }
}

async function failure(response) {
  let type = `HTTP ${response.status}`;
  let message = response.statusText || "the request failed";
  let details = null;
  try {
    const data = await response.json();
    if (data && data.error) {
      type = data.error.type || type;
      message = data.error.message || message;
      details = data.error;
    }
  } catch {
    // not JSON (a proxy's page): the status says enough
  }
  return new ApiError(response.status, type, message, details);
}

async function call(method, path, body) {
  const response = await request(method, path, body);
  if (!response.ok) throw await failure(response);
  return response.json();
}

function parseFrame(frame) {
  let event = "message";
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue; // keep-alive comments
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { event, data: JSON.parse(data.join("\n")) } : null;
}

/**
 * POST `path` and yield its SSE events as {event, data}; a refusal before the stream starts
 * (409, 422, ...) is thrown as ApiError. Aborting `signal` only stops reading: the answer goes
 * on on the server (only a stop stops it).
 */
async function* stream(path, body, signal) {
  const response = await request("POST", path, body, signal);
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = parseFrame(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (event) yield event;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

const conversation = (id) => `conversations/${encodeURIComponent(id)}`;

/** One function per route of the API that the page uses. */
export const api = {
  list: () => call("GET", "conversations"),
  create: (settings) => call("POST", "conversations", settings),
  show: (id) => call("GET", conversation(id)),
  tree: (id) => call("GET", `${conversation(id)}/tree`),
  attempts: (id) => call("GET", `${conversation(id)}/attempts`),
  explain: (id, a, b) =>
    call(
      "GET",
      `${conversation(id)}/explain?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`,
    ),
  stop: (id) => call("POST", `${conversation(id)}/stop`),
  switchTo: (id, nodeId) => call("POST", `${conversation(id)}/switch`, { node_id: nodeId }),
  setBudget: (id, budget) => call("POST", `${conversation(id)}/budget`, { budget }),
  answer: (id, action, body, signal) => stream(`${conversation(id)}/${action}`, body, signal),
};
