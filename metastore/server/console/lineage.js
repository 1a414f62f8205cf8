// Lineage: source connectors -> topics -> streams and tables -> persistent queries -> their
// sinks -> the sinks' topics -> sink connectors, from the same
// statements the CLI runs (LIST STREAMS EXTENDED, LIST TABLES EXTENDED), laid out in columns by
// the longest path from a topic. A box shows its DESCRIBE when clicked; a query is colored by
// its state and shows what it read.
import { element, ksql } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";
const CONNECTORS_EVERY_MS = 10_000, MOST_CONNECTORS = 20;
let connectors = { at: 0, listed: [] };
const WIDTH = 170, HEIGHT = 44, COLUMN = 215, ROW = 64;
let selected = null;

export async function showLineage() {
  const answer = await ksql("LIST STREAMS EXTENDED; LIST TABLES EXTENDED;");
  const sources = answer.flatMap((entity) => entity.sourceDescriptions || []);
  const { nodes, edges } = graphOf(sources, await connectorsOf());
  draw(nodes, edges);
  if (selected && nodes.has(selected)) describe(nodes.get(selected));
}

// The connectors, with the topics each uses (SHOW CONNECTORS, DESCRIBE CONNECTOR), read again
// every ten seconds; none when the node has no Connect cluster.
async function connectorsOf() {
  if (Date.now() - connectors.at < CONNECTORS_EVERY_MS) return connectors.listed;
  connectors.at = Date.now();  // one reading at a time, however slow Connect is
  let listed = [];
  try {
    const [list] = await ksql("SHOW CONNECTORS;");
    listed = await Promise.all((list.connectors || []).slice(0, MOST_CONNECTORS).map(
      (connector) => ksql(`DESCRIBE CONNECTOR \`${connector.name.replace(/`/g, "``")}\`;`)
        .then(([described]) => ({ ...connector, topics: described.topics || [] }))
        .catch(() => ({ ...connector, topics: [] }))));
  } catch { /* no Connect cluster here */ }
  connectors = { at: Date.now(), listed };
  return listed;
}

function graphOf(sources, connected) {
  const nodes = new Map();
  const edges = [];
  const add = (id, kind, label, detail) => {
    if (!nodes.has(id)) nodes.set(id, { id, kind, label, detail });
    return nodes.get(id);
  };
  for (const source of sources) {
    add(`topic:${source.topic}`, "topic", source.topic, { topic: source.topic,
      partitions: source.partitions });
    add(`source:${source.name}`, source.type.toLowerCase(), source.name, source);
    const written = (source.writeQueries || []).length > 0;  // a sink: its rows go to the topic
    edges.push(written ? [`source:${source.name}`, `topic:${source.topic}`]
      : [`topic:${source.topic}`, `source:${source.name}`]);
  }
  for (const source of sources) {
    for (const query of source.readQueries || []) {
      add(`query:${query.id}`, "query", query.id, query);
      edges.push([`source:${source.name}`, `query:${query.id}`]);
    }
    for (const query of source.writeQueries || []) {
      add(`query:${query.id}`, "query", query.id, query);
      edges.push([`query:${query.id}`, `source:${source.name}`]);
    }
  }
  for (const connector of connected) {
    add(`connector:${connector.name}`, "connector", connector.name, connector);
    for (const topic of connector.topics) {
      add(`topic:${topic}`, "topic", topic, { topic });
      edges.push(connector.type === "source" ? [`connector:${connector.name}`, `topic:${topic}`]
        : [`topic:${topic}`, `connector:${connector.name}`]);
    }
  }
  const unique = [...new Map(edges.map((edge) => [edge.join(">"), edge])).values()];
  return { nodes, edges: unique };
}

function ranks(nodes, edges) {
  const rank = new Map([...nodes.keys()].map((id) => [id, 0]));
  for (let pass = 0; pass < nodes.size; pass += 1) {
    let changed = false;
    for (const [from, to] of edges) {
      if (rank.get(to) < rank.get(from) + 1) { rank.set(to, rank.get(from) + 1); changed = true; }
    }
    if (!changed) break;
  }
  return rank;
}

function draw(nodes, edges) {
  const rank = ranks(nodes, edges);
  const columns = new Map();
  for (const node of [...nodes.values()].sort((a, b) => a.label.localeCompare(b.label))) {
    const column = rank.get(node.id);
    if (!columns.has(column)) columns.set(column, []);
    const row = columns.get(column).push(node) - 1;
    node.x = 20 + column * COLUMN;
    node.y = 20 + row * ROW;
  }
  const svg = document.getElementById("graph");
  const tallest = Math.max(1, ...[...columns.values()].map((c) => c.length));
  svg.setAttribute("width", 40 + Math.max(1, columns.size) * COLUMN);
  svg.setAttribute("height", 40 + tallest * ROW);
  const shapes = [arrowHead()];
  for (const [from, to] of edges) {
    const a = nodes.get(from), b = nodes.get(to);
    const path = document.createElementNS(SVG, "path");
    const startX = a.x + WIDTH, startY = a.y + HEIGHT / 2, endX = b.x, endY = b.y + HEIGHT / 2;
    const bend = (endX - startX) / 2;
    path.setAttribute("d", `M${startX},${startY} C${startX + bend},${startY} `
      + `${endX - bend},${endY} ${endX},${endY}`);
    path.setAttribute("class", "edge");
    path.setAttribute("marker-end", "url(#arrow)");
    shapes.push(path);
  }
  for (const node of nodes.values()) shapes.push(box(node));
  svg.replaceChildren(...shapes);
}

function box(node) {
  const group = document.createElementNS(SVG, "g");
  const state = node.kind === "query" ? ` ${node.detail.state || ""}` : "";
  group.setAttribute("class", `box ${node.kind}${state}`);
  group.setAttribute("data-id", node.id);
  group.setAttribute("transform", `translate(${node.x},${node.y})`);
  const rect = document.createElementNS(SVG, "rect");
  rect.setAttribute("width", WIDTH);
  rect.setAttribute("height", HEIGHT);
  rect.setAttribute("rx", 6);
  const title = document.createElementNS(SVG, "text");
  title.setAttribute("x", 10);
  title.setAttribute("y", 18);
  title.textContent = node.label.length > 23 ? `${node.label.slice(0, 22)}…` : node.label;
  const full = document.createElementNS(SVG, "title");
  full.textContent = node.label;
  const kind = document.createElementNS(SVG, "text");
  kind.setAttribute("x", 10);
  kind.setAttribute("y", 35);
  kind.setAttribute("class", "kind");
  kind.textContent = node.kind === "query"
    ? `${node.detail.state || ""} ${node.detail.recordsPerSecond != null
      ? `${node.detail.recordsPerSecond} rec/s` : ""} ${node.detail.lag != null
      ? `lag ${node.detail.lag}` : ""}`.trim()
    : node.kind;
  group.append(full, rect, title, kind);
  group.addEventListener("click", () => { selected = node.id; describe(node); });
  return group;
}

function arrowHead() {
  const defs = document.createElementNS(SVG, "defs");
  defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
    + 'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker>';
  return defs;
}

function describe(node) {
  const details = document.getElementById("details");
  const detail = node.detail;
  const parts = [element("h3", { text: `${node.kind.toUpperCase()} ${node.label}` })];
  if (node.kind === "topic") {
    parts.push(element("p", { text: `${detail.partitions || "?"} partition(s)` }));
  } else if (node.kind === "connector") {
    parts.push(element("p", { text: `${detail.type} connector ${detail.className || ""}: `
      + `${detail.state || ""}` }), element("p", { text: `Topics: ${detail.topics.join(", ")}` }));
  } else if (node.kind === "query") {
    parts.push(element("p", { text: `State: ${detail.state}; on ${detail.ownerNode || "no node"}` }),
      element("pre", { text: detail.queryString || "" }));
    if (detail.errorMessage) parts.push(element("p", { class: "bad", text: detail.errorMessage }));
  } else {
    parts.push(element("p", { text: `Topic ${detail.topic}; key ${detail.keyFormat}, value `
      + `${detail.valueFormat}${detail.windowType ? `; ${detail.windowType} window` : ""}` }));
    const rows = (detail.fields || []).map((field) => element("tr", {},
      element("td", { text: field.name }),
      element("td", { text: field.schema ? field.schema.type : "" }),
      element("td", { text: field.type === "KEY" ? "key" : "" })));
    parts.push(element("table", {}, element("thead", {}, element("tr", {},
      element("th", { text: "Column" }), element("th", { text: "Type" }), element("th"))),
    element("tbody", {}, ...rows)));
    if (detail.statistics) parts.push(element("p", { text: `Statistics: ${detail.statistics}` }));
    if (detail.errorStats) parts.push(element("p", { text: `Errors: ${detail.errorStats}` }));
  }
  details.replaceChildren(...parts);
}
