// The console's shell: the views, switched by the header's buttons, and the node it talks to.
import { getJson } from "./api.js";
import { showCluster } from "./cluster.js";
import { showLineage } from "./lineage.js";
import { startEditor } from "./editor.js";
import { showHistory } from "./history.js";

const refreshers = { cluster: showCluster, lineage: showLineage, history: showHistory };
let current = "cluster";

export function problem(message) {
  document.getElementById("problem").textContent = message || "";
}

let refreshing = null;

async function refresh() {
  const show = refreshers[current];
  if (!show) return;
  if (refreshing) { await refreshing; return; }
  const view = current;
  refreshing = (async () => {
    try {
      await show();
      problem("");
    } catch (error) {
      problem(`${view}: ${error.message}`);
    } finally {
      refreshing = null;
    }
  })();
  await refreshing;
}

function select(view) {
  current = view;
  for (const button of document.querySelectorAll("nav button")) {
    button.classList.toggle("active", button.dataset.view === view);
  }
  for (const section of document.querySelectorAll("main .view")) {
    section.classList.toggle("active", section.id === view);
  }
  location.hash = view;
  refresh();
}

async function start() {
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => select(button.dataset.view));
  }
  startEditor(() => { if (current !== "editor") refresh(); });
  try {
    const status = await getJson("/v1/metastore");
    document.getElementById("node-name").textContent =
      `${status.nodeId} of service ${status.serviceId}`;
  } catch (error) {
    problem(error.message);
  }
  const wanted = (location.hash || "").slice(1);
  select(["cluster", "lineage", "editor", "history"].includes(wanted) ? wanted : "cluster");
  poll();
}

// One refresh at a time, two seconds after the last one ended; none while the page is hidden.
async function poll() {
  if (!document.hidden && (current === "cluster" || current === "lineage")) await refresh();
  setTimeout(poll, 2000);
}

start();
