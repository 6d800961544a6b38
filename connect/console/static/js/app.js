// The console's shell: a hash router (#/connectors, #/connectors/{name}, #/new, #/topics/{topic},
// #/groups/{group}, ...), the polling of the page shown, and the worker's health in the top bar.
import { get } from "./api.js";
import { fill, h } from "./dom.js";
import { Page } from "./page.js";
import { connectorDetail } from "./pages/connector.js";
import { connectorList } from "./pages/connectors.js";
import { createForm, editForm } from "./pages/form.js";
import { groupDetail, groupList } from "./pages/groups.js";
import { topicDetail, topicList } from "./pages/topics.js";

const ROUTES = [
  [/^#\/connectors\/?$/, "connectors", connectorList],
  [/^#\/connectors\/([^/]+)\/edit$/, "connectors", editForm],
  [/^#\/connectors\/([^/]+)$/, "connectors", connectorDetail],
  [/^#\/new$/, "new", createForm],
  [/^#\/topics\/?$/, "topics", topicList],
  [/^#\/topics\/([^/]+)$/, "topics", topicDetail],
  [/^#\/groups\/?$/, "groups", groupList],
  [/^#\/groups\/([^/]+)$/, "groups", groupDetail],
];

let current = null;

function route() {
  const hash = location.hash || "#/connectors";
  if (current) current.stop();
  const main = document.getElementById("page");
  for (const [pattern, nav, show] of ROUTES) {
    const m = pattern.exec(hash);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === nav);
    const page = new Page(main);
    current = page;
    main.replaceChildren();
    show(page, ...m.slice(1).map(decodeURIComponent));
    return;
  }
  location.hash = "#/connectors";
}

async function workerInfo() {
  const el = document.getElementById("worker");
  let healthy = false;
  let version = "";
  try {
    version = (await get("")).version;
    healthy = (await get("health")).status === "healthy";
  } catch {
    healthy = false;
  }
  fill(el, h("span", { class: ["dot", healthy ? "ok" : "bad"] }),
    `${location.host} · ${healthy ? "healthy" : "not ready"}${version ? ` · v${version}` : ""}`);
}

window.addEventListener("hashchange", route);
route();
workerInfo();
setInterval(workerInfo, 10000);
