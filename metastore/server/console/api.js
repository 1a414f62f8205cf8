// The node's REST API, as the console calls it: the same endpoints and answers as any client.
// Credentials are the browser's own for this origin (the API's basic auth, when it has one).

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

async function answer(response) {
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = { message: text }; }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export async function getJson(path) {
  return answer(await fetch(path, { headers: { Accept: "application/json" } }));
}

export async function ksql(text, properties = {}, variables = {}) {
  return answer(await fetch("/ksql", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ ksql: text, streamsProperties: properties, sessionVariables: variables }),
  }));
}

// A pull or push query over /query-stream: onHeader({queryId, columnNames}), then onRow(array)
// for each row as it arrives. Resolves when the query ends (or is stopped through `signal`).
export async function streamQuery(sql, properties, variables, signal, onHeader, onRow) {
  const response = await fetch("/query-stream", {
    method: "POST", signal,
    headers: { "Content-Type": "application/json", Accept: "application/vnd.ksqlapi.delimited.v1" },
    body: JSON.stringify({ sql, properties, sessionVariables: variables }),
  });
  if (!response.ok) return answer(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let header = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (!line) continue;
      const item = JSON.parse(line);
      if (header === null) { header = item; onHeader(item); }
      else if (Array.isArray(item)) onRow(item);
      else if (item.message) throw new ApiError(200, item);
    }
  }
  return header;
}

export async function closeQuery(queryId) {
  return answer(await fetch("/close-query", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ queryId }),
  }));
}

export function element(tag, attributes = {}, ...children) {
  const made = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") made.textContent = value;
    else if (name.startsWith("on")) made.addEventListener(name.slice(2), value);
    else made.setAttribute(name, value);
  }
  for (const child of children) made.append(child);
  return made;
}
