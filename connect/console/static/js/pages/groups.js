// Consumer groups: every group with its state, members and total lag (GET /admin/groups, then each
// group); one group's members and its committed offset, end offset and lag per partition
// (GET /admin/groups/{group}).
import { ApiError, get, seg } from "../api.js";
import { badge, empty, fill, h, num, stat, table } from "../dom.js";
import { POLL_MS } from "../page.js";

async function detailOrNull(group) {
  try {
    return await get(`admin/groups/${seg(group)}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null; // gone since it was listed
    throw err;
  }
}

export function groupList(page) {
  const body = h("div", {}, empty("Loading groups…"));
  const count = h("span", { class: "sub" });
  page.main.append(h("div", { class: "page-head" }, h("h1", {}, "Consumer groups"), count), page.alert,
    h("div", { class: "panel flush" }, body),
    h("p", { class: "muted small" }, "Sink connectors consume in the group connect-<connector>; workers form a " +
      "group of protocol type connect."));
  page.every(POLL_MS, async () => {
    const groups = await get("admin/groups");
    const details = await Promise.all(groups.map((g) => detailOrNull(g.group)));
    if (!page.alive) return;
    count.textContent = `${groups.length} group${groups.length === 1 ? "" : "s"}`;
    fill(body, groups.length ? table(["Group", "State", "Protocol type", ["Members", "num"], ["Partitions", "num"],
      ["Lag", "num"]], groups.map((g, i) => h("tr", { "data-group": g.group },
      h("td", { class: "wrap" }, h("a", { href: `#/groups/${seg(g.group)}` }, g.group)),
      h("td", {}, badge(g.state)), h("td", {}, g.protocol_type || "–"), h("td", { class: "num" }, num(g.members)),
      h("td", { class: "num" }, details[i] ? num(details[i].offsets.length) : "–"),
      h("td", { class: "num lag" }, details[i] ? num(details[i].lag) : "–"))), { class: "groups" })
      : empty("No consumer groups."));
  });
}

export function groupDetail(page, group) {
  const stats = h("div", { class: "stats" });
  const members = h("div");
  const offsets = h("div");
  const connector = h("span", { class: "sub" });
  page.main.append(
    h("div", { class: "crumb" }, h("a", { href: "#/groups" }, "Consumer groups"), " /"),
    h("div", { class: "page-head" }, h("h1", { class: "group-name" }, group), connector),
    page.alert,
    h("section", { class: "panel" }, stats),
    h("section", { class: "panel flush" }, h("h2", {}, "Lag per partition"), offsets),
    h("section", { class: "panel flush" }, h("h2", {}, "Members"), members));
  if (group.startsWith("connect-")) {
    const name = group.slice("connect-".length);
    get(`connectors/${seg(name)}`).then(() => {
      fill(connector, "Sink connector ", h("a", { href: `#/connectors/${seg(name)}` }, name));
    }).catch(() => {});
  }
  page.every(POLL_MS, async () => {
    const g = await detailOrNull(group);
    if (!page.alive) return;
    if (g === null) {
      fill(stats, h("div", { class: "notice" }, `There is no group ${group} (no member and no committed offset).`));
      members.replaceChildren();
      offsets.replaceChildren();
      return;
    }
    const protocol = `${g.protocol_type || "–"}${g.protocol ? ` · ${g.protocol}` : ""}`;
    fill(stats, stat("State", badge(g.state), { figure: "state" }),
      stat("Protocol", h("span", { class: "value-text" }, protocol), { figure: "protocol" }),
      stat("Members", num(g.members.length), { figure: "members" }), stat("Total lag", num(g.lag), { figure: "lag" }));
    const owner = new Map(g.members.map((m) => [m.member_id, m.client_id]));
    fill(offsets, g.offsets.length ? table(["Topic", ["Partition", "num"], ["Committed", "num"], ["End offset", "num"],
      ["Lag", "num"], "Member"], g.offsets.map((o) => h("tr", { "data-partition": `${o.topic}-${o.partition}` },
      h("td", { class: "wrap" }, h("a", { href: `#/topics/${seg(o.topic)}` }, o.topic)),
      h("td", { class: "num" }, o.partition), h("td", { class: "num" }, num(o.committed_offset)),
      h("td", { class: "num" }, num(o.end_offset)), h("td", { class: "num lag" }, num(o.lag)),
      h("td", { class: "mono small" }, o.member_id ? owner.get(o.member_id) || o.member_id : "–"))))
      : empty("No committed offsets and no assigned partitions."));
    fill(members, g.members.length ? table(["Client id", "Host", "Assignment", "Member id"], g.members.map((m) =>
      h("tr", {}, h("td", { class: "mono" }, m.client_id), h("td", { class: "mono" }, m.host),
        h("td", {}, m.assignment.length
          ? m.assignment.map((a) => h("span", { class: "chip mono small" }, `${a.topic}-${a.partition}`))
          : h("span", { class: "muted" }, g.protocol_type === "consumer" ? "nothing" : "(not a consumer group)")),
        h("td", { class: "mono small wrap" }, m.member_id))))
      : empty("No members: nobody consumes in this group now."));
  });
}
