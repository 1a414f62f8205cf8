// Editor: statements highlighted as they are typed, run in order as the CLI runs them. SET,
// UNSET, DEFINE and UNDEFINE stay in the tab (its properties and variables go with each
// request); SELECT runs over /query-stream, its rows shown as they arrive until it ends or Stop
// closes it (/close-query); the rest goes to /ksql, a run of them in one request. An error is
// shown at the line and column of the editor it points at.
import { ApiError, closeQuery, element, ksql, streamQuery } from "./api.js";

const KEYWORDS = new Set(("SELECT FROM WHERE GROUP BY HAVING EMIT CHANGES FINAL CREATE OR "
  + "REPLACE STREAM TABLE AS WITH INSERT INTO VALUES DROP DELETE TOPIC TERMINATE SHOW LIST "
  + "DESCRIBE EXTENDED EXPLAIN PARTITION JOIN LEFT RIGHT FULL OUTER INNER ON WINDOW TUMBLING "
  + "HOPPING SESSION SIZE ADVANCE KEY PRIMARY AND NOT NULL IS IN LIKE BETWEEN CASE WHEN THEN "
  + "ELSE END LIMIT SET UNSET DEFINE UNDEFINE PRINT CAST STRUCT ARRAY MAP INT INTEGER BIGINT "
  + "DOUBLE STRING VARCHAR BOOLEAN DECIMAL TIMESTAMP TYPE SOURCE SINK CONNECTOR STREAMS TABLES "
  + "QUERIES TOPICS PAUSE RESUME ALTER ADD COLUMN IF EXISTS").split(" "));
// Quoted strings and names, and comments, run to the end of the text when left open, so that a
// ';' inside them never ends a statement.
const TOKENS = /('(?:[^']|'')*(?:'|$)|"[^"]*(?:"|$)|`[^`]*(?:`|$)|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\s+|.)/g;
const COMMENTS = /--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/g;

const tabs = [{ name: "Tab 1", text: "", properties: {}, variables: {} }];
let active = 0;
let running = null;
let onChange = () => {};

export function startEditor(changed) {
  onChange = changed;
  const input = document.getElementById("statements");
  input.addEventListener("input", () => { tabs[active].text = input.value; paint(); });
  input.addEventListener("scroll", () => {
    const overlay = document.getElementById("highlight");
    overlay.scrollTop = input.scrollTop;
    overlay.scrollLeft = input.scrollLeft;
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); run(); }
  });
  document.getElementById("run").addEventListener("click", run);
  document.getElementById("stop").addEventListener("click", stop);
  drawTabs();
  paint();
}

function drawTabs() {
  const buttons = tabs.map((tab, index) => element("button", {
    text: tab.name, class: index === active ? "active" : "",
    onclick: () => { active = index; document.getElementById("statements").value = tab.text;
      drawTabs(); paint(); } }));
  buttons.push(element("button", { text: "+", title: "A new tab, with its own SET and DEFINE",
    onclick: () => { tabs.push({ name: `Tab ${tabs.length + 1}`, text: "", properties: {},
      variables: {} }); active = tabs.length - 1;
    document.getElementById("statements").value = ""; drawTabs(); paint(); } }));
  document.getElementById("tabs").replaceChildren(...buttons);
  const tab = tabs[active];
  const session = [...Object.entries(tab.properties).map(([k, v]) => `SET ${k}=${v}`),
    ...Object.entries(tab.variables).map(([k, v]) => `DEFINE ${k}=${v}`)];
  document.getElementById("session").textContent = session.join("; ");
}

function paint(errorLine = null) {
  const text = tabs[active].text;
  const lines = [];
  let line = [];
  for (const token of text.match(TOKENS) || []) {
    const parts = token.split("\n");
    parts.forEach((part, index) => {
      if (index > 0) { lines.push(line); line = []; }
      if (part) line.push(span(part, token));
    });
  }
  lines.push(line);
  const overlay = document.getElementById("highlight");
  overlay.replaceChildren(...lines.map((spans, index) => element("div", {
    class: index + 1 === errorLine ? "line error-line" : "line" }, ...spans, "\u200b")));
}

function span(part, token) {
  let kind = "";
  if (token.startsWith("'") || token.startsWith("`")) kind = "string";
  else if (token.startsWith("--") || token.startsWith("/*")) kind = "comment";
  else if (/^\d/.test(token)) kind = "number";
  else if (KEYWORDS.has(token.toUpperCase())) kind = "keyword";
  return kind ? element("span", { class: kind, text: part }) : part;
}

// The editor's statements, each with where it starts (past the blanks before it), split at ';'
// outside quotes and comments.
function statementsOf(text) {
  const found = [];
  const keep = (from, to) => {
    const piece = text.slice(from, to);
    const lead = piece.length - piece.trimStart().length;
    if (piece.trim() && piece.trim() !== ";") found.push({ start: from + lead, text: piece.slice(lead) });
  };
  let start = 0;
  let offset = 0;
  for (const token of text.match(TOKENS) || []) {
    offset += token.length;
    if (token === ";") { keep(start, offset); start = offset; }
  }
  if (withoutComments(text.slice(start)).trim()) keep(start, text.length);
  return found;
}

function kindOf(statement) {
  const words = withoutComments(statement).trim().split(/\s+/);
  return (words[0] || "").toUpperCase();
}

function withoutComments(statement) {
  return (statement.match(TOKENS) || []).map((token) => (
    token.startsWith("--") || token.startsWith("/*") ? " " : token)).join("");
}

async function run() {
  if (running) return;
  const tab = tabs[active];
  const text = tab.text;
  clearError();
  const results = document.getElementById("results");
  results.replaceChildren();
  let batch = null;
  const flush = async () => {
    if (!batch) return true;
    const { start, end } = batch;
    batch = null;
    return sendBatch(text, start, end, tab, results);
  };
  for (const statement of statementsOf(text)) {
    const kind = kindOf(statement.text);
    let local;
    try {
      local = session(kind, statement.text, tab);
    } catch (error) {
      if (await flush()) showError(error, text, statement.start);
      return;
    }
    // with variables, the node places an error in the statement it substituted: one a request
    const alone = Object.keys(tab.variables).length > 0;
    if (local !== null || kind === "SELECT" || alone) {
      if (!(await flush())) return;
      if (local !== null) { results.append(element("p", { class: "ok", text: local })); continue; }
      if (kind === "SELECT") {
        if (!(await select(text, statement, tab, results))) return;
      } else if (!(await sendBatch(text, statement.start,
        statement.start + statement.text.length, tab, results))) return;
      continue;
    }
    if (!batch) batch = { start: statement.start, end: statement.start + statement.text.length };
    else batch.end = statement.start + statement.text.length;
  }
  await flush();
  onChange();
}

const QUOTED = "'((?:[^']|'')*)'";
const SESSION = {
  SET: new RegExp(`^SET\\s+${QUOTED}\\s*=\\s*${QUOTED}\\s*;?$`, "is"),
  UNSET: new RegExp(`^UNSET\\s+${QUOTED}\\s*;?$`, "is"),
  DEFINE: new RegExp(`^DEFINE\\s+([A-Za-z_][A-Za-z0-9_]*)\\s*=\\s*${QUOTED}\\s*;?$`, "is"),
  UNDEFINE: /^UNDEFINE\s+([A-Za-z_][A-Za-z0-9_]*)\s*;?$/is,
};

// SET / UNSET / DEFINE / UNDEFINE, kept in the tab as ksqlDB's CLI keeps them: the message of
// what was done; null for any other statement. A malformed one throws.
function session(kind, text, tab) {
  const pattern = SESSION[kind];
  if (!pattern) return null;
  const found = pattern.exec(withoutComments(text).trim());
  if (!found) throw new Error(`${kind}: expected ${{ SET: "SET 'name' = 'value';",
    UNSET: "UNSET 'name';", DEFINE: "DEFINE name = 'value';", UNDEFINE: "UNDEFINE name;" }[kind]}`);
  const [, first, second] = found.map((part) => (part ?? "").replace(/''/g, "'"));
  let done;
  if (kind === "SET") { tab.properties[first] = second; done = `Property ${first} set to ${second}`; }
  if (kind === "UNSET") { delete tab.properties[first]; done = `Property ${first} unset`; }
  if (kind === "DEFINE") { tab.variables[first] = second; done = `Variable ${first} defined`; }
  if (kind === "UNDEFINE") { delete tab.variables[first]; done = `Variable ${first} undefined`; }
  drawTabs();
  return done;
}

async function sendBatch(text, start, end, tab, results) {
  try {
    const entities = await ksql(text.slice(start, end), tab.properties, tab.variables);
    for (const entity of entities) results.append(render(entity));
    return true;
  } catch (error) {
    showError(error, text, start);
    return false;
  }
}

async function select(text, statement, tab, results) {
  const controller = new AbortController();
  const table = element("table", { class: "rows", "data-testid": "rows" });
  const body = element("tbody");
  results.append(table);
  let queryId = null;
  running = { controller, queryId: null };
  document.getElementById("stop").disabled = false;
  try {
    await streamQuery(statement.text, tab.properties, tab.variables, controller.signal,
      (header) => {
        queryId = header.queryId;
        running.queryId = queryId;
        table.append(element("thead", {}, element("tr", {},
          ...(header.columnNames || []).map((name) => element("th", { text: name })))), body);
      },
      (row) => body.append(element("tr", {}, ...row.map((value) => element("td", {
        text: typeof value === "object" && value !== null ? JSON.stringify(value) : String(value),
      })))));
    results.append(element("p", { class: "ok", text: `${body.rows.length} row(s)` }));
    return true;
  } catch (error) {
    if (error.name === "AbortError") {
      results.append(element("p", { class: "ok", text: `Stopped after ${body.rows.length} row(s)` }));
      return true;
    }
    showError(error, text, statement.start);
    return false;
  } finally {
    running = null;
    document.getElementById("stop").disabled = true;
  }
}

async function stop() {
  if (!running) return;
  const { controller, queryId } = running;
  controller.abort();
  if (queryId) {
    try { await closeQuery(queryId); } catch { /* the query may have ended already */ }
  }
}

function render(entity) {
  const type = entity["@type"];
  if (entity.commandStatus) {
    return element("p", { class: "ok", text: entity.commandStatus.message || "Done" });
  }
  const listed = entity.streams || entity.tables || entity.queries || entity.topics;
  if (Array.isArray(listed)) {
    const columns = [...new Set(listed.flatMap((item) => Object.keys(item)))]
      .filter((column) => !["@type"].includes(column)).slice(0, 6);
    return element("table", { class: "rows" },
      element("thead", {}, element("tr", {}, ...columns.map((c) => element("th", { text: c })))),
      element("tbody", {}, ...listed.map((item) => element("tr", {}, ...columns.map((c) =>
        element("td", { text: typeof item[c] === "object" ? JSON.stringify(item[c])
          : String(item[c] ?? "") }))))));
  }
  return element("pre", { text: `${type || ""}\n${JSON.stringify(entity, null, 2)}` });
}

function clearError() {
  document.getElementById("error").textContent = "";
  paint();
}

// The error at its place in the editor: the node's "line L:C" (1-based) is of the request's
// text, which starts at `start`; an error without one points at the statement it names.
function showError(error, text, start) {
  const body = error instanceof ApiError ? error.body : {};
  const message = body.message || error.message;
  const before = text.slice(0, start);
  const baseLine = before.split("\n").length;
  const baseColumn = start - before.lastIndexOf("\n");
  let line = baseLine;
  let column = baseColumn;
  const at = /line (\d+):(\d+)/.exec(message) || /Line: (\d+), Col: (\d+)/.exec(message);
  if (at) {
    const relative = Number(at[1]);
    line = baseLine + relative - 1;
    column = relative === 1 ? baseColumn + Number(at[2]) - 1 : Number(at[2]);  // 1-based
  } else if (body.statementText) {
    const found = text.indexOf(body.statementText.trim(), start);
    if (found >= 0) {
      const upTo = text.slice(0, found);
      line = upTo.split("\n").length;
      column = found - upTo.lastIndexOf("\n");
    }
  }
  const code = body.error_code ? ` (${body.error_code})` : "";
  document.getElementById("error").textContent =
    `Line ${line}, column ${column}${code}: ${message}`;
  paint(line);
}
