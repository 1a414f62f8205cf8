// Cluster: every node the service knows (/clusterStatus: heartbeats, with each node's catalog
// fingerprint), whether they agree, the node that wrote last and the command log's end.
import { element, getJson } from "./api.js";

export async function showCluster() {
  const [cluster, self] = await Promise.all([getJson("/clusterStatus"), getJson("/v1/metastore")]);
  const hosts = Object.entries(cluster.clusterStatus || {})
    .map(([address, host]) => ({ address, ...host }))
    .sort((a, b) => String(a.nodeId).localeCompare(String(b.nodeId)));
  const rows = hosts.map((host) => {
    const fingerprint = host.imageFingerprint || "";
    return element("tr", { "data-node": host.nodeId, class: host.hostAlive ? "" : "dead" },
      element("td", { text: host.nodeId }),
      element("td", { text: host.hostAlive ? "yes" : "no" }),
      element("td", { text: host.state, class: `state ${host.state}` }),
      element("td", { text: host.appliedOffset ?? "" }),
      element("td", { text: fingerprint ? fingerprint.slice(0, 16) : "unknown (an older node)",
        title: fingerprint, class: "mono" }),
      element("td", { text: host.nodeId === self.lastWriter ? "writer" : "" }));
  });
  document.getElementById("nodes").replaceChildren(...rows);
  // Nodes of an older release send no fingerprint: they are left out of the agreement.
  const live = hosts.filter((host) => host.hostAlive && host.state === "READY"
    && host.imageFingerprint);
  const views = new Set(live.map((host) => `${host.appliedOffset}/${host.imageFingerprint}`));
  const agreement = document.getElementById("agreement");
  const agree = live.length > 0 && views.size === 1;
  agreement.textContent = agree
    ? `${live.length} of ${hosts.length} nodes agree: offset ${live[0].appliedOffset}, `
      + `catalog ${String(live[0].imageFingerprint).slice(0, 16)}`
    : `${live.length} of ${hosts.length} nodes READY; they do not agree yet`;
  agreement.className = agree ? "agree" : "disagree";
  document.getElementById("log-end").textContent =
    `Command log end offset: ${self.endOffset ?? "unknown"}; this node applied through `
    + `${self.appliedOffset}.`;
}
