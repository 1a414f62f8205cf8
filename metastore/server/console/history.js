// History: the command log as a timeline, newest first: who wrote each statement, when, from
// which node (GET /v1/metastore/log, the rows of `metastore log dump`).
import { element, getJson } from "./api.js";

export async function showHistory() {
  const log = await getJson("/v1/metastore/log?limit=200");
  const items = [...log.records].reverse().map((record) => element("li", {
    "data-offset": record.offset },
  element("span", { class: "when", text: record.timestamp
    ? new Date(record.timestamp).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "" }),
  element("span", { class: "who", text: record.submitter || "(no user)" }),
  element("span", { class: "where", text: `offset ${record.offset} via ${record.originNode || "?"}` }),
  element("pre", { text: record.statement || record.error || "" })));
  document.getElementById("timeline").replaceChildren(...items);
}
