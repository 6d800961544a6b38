// New connector and Edit: a form generated from the plugin's config definitions (PUT
// /connector-plugins/{class}/config/validate answers them with per-field errors), validated as the user
// types, each error shown next to its field; saved with PUT /connectors/{name}/config.
import { api, ApiError, get, seg } from "../api.js";
import { empty, fill, h, toast } from "../dom.js";

const DEBOUNCE_MS = 350;
const TOP = new Set(["name", "connector.class"]); // shown first, outside the groups

function pluginLabel(p) {
  return `${p.class.split(".").pop()} (${p.type})`;
}

/** "key=value" lines (blank lines and # comments ignored); the lines that are not key=value. */
function parseExtras(text) {
  const values = {};
  const bad = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const at = line.indexOf("=");
    if (at <= 0) bad.push(line);
    else values[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return { values, bad };
}

export function createForm(page) {
  connectorForm(page, null);
}

export function editForm(page, name) {
  connectorForm(page, name);
}

async function connectorForm(page, existing) {
  const editing = existing !== null;
  const nameInput = h("input", { type: "text", id: "f-name", name: "name", autocomplete: "off", spellcheck: "false",
                                 placeholder: "my-connector", value: existing || "", disabled: editing });
  const classSelect = h("select", { id: "f-class", name: "connector.class" });
  const nameError = h("div", { class: "field-error", "data-error-for": "name" });
  const classError = h("div", { class: "field-error", "data-error-for": "connector.class" });
  const groupsBox = h("div", { class: "config-groups" });
  const extrasArea = h("textarea", { id: "f-extras", spellcheck: "false", rows: 4,
                                     placeholder: "transforms=mask\ntransforms.mask.type=MaskField$Value" });
  const extrasError = h("div", { class: "field-error", "data-error-for": "extras" });
  const validity = h("span", { class: "validity", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "primary", id: "submit" }, editing ? "Save" : "Create");
  const form = h("form", { class: "connector-form", novalidate: true },
    h("section", { class: "panel" },
      h("div", { class: "field", "data-field": "name" },
        h("label", { for: "f-name" }, "name", h("span", { class: "req" }, "*")),
        h("div", {}, nameInput, h("div", { class: "doc" }, "Unique name of the connector (no \"/\")."), nameError)),
      h("div", { class: "field", "data-field": "connector.class" },
        h("label", { for: "f-class" }, "connector.class", h("span", { class: "req" }, "*")),
        h("div", {}, classSelect, h("div", { class: "doc" }, "The connector plugin."), classError))),
    groupsBox,
    h("section", { class: "panel" }, h("h2", {}, "Other settings"),
      h("div", { class: "doc muted small" }, "Keys the plugin does not declare (transforms, predicates, producer or " +
        "consumer overrides), one key=value a line."),
      extrasArea, extrasError),
    h("div", { class: "form-actions" }, submit,
      h("a", { class: "button", href: editing ? `#/connectors/${seg(existing)}` : "#/connectors" }, "Cancel"),
      validity));
  page.main.append(
    h("div", { class: "crumb" }, h("a", { href: "#/connectors" }, "Connectors"), " /"),
    h("div", { class: "page-head" }, h("h1", {}, editing ? `Edit ${existing}` : "New connector"),
      h("span", { class: "sub" }, "Checked by the worker as you type")),
    page.alert, form);

  const values = {}; // key -> text the user gave (or the existing config held)
  const touched = new Set();
  let showAll = false;
  let fields = new Map(); // key -> {input, error, box}
  let sequence = 0;
  let timer = null;

  let plugins;
  let config = {};
  try {
    plugins = await get("connector-plugins");
    if (editing) config = await get(`connectors/${seg(existing)}/config`);
  } catch (err) {
    page.error(err);
    return;
  }
  if (!page.alive) return;
  for (const type of ["source", "sink"]) {
    const group = h("optgroup", { label: type === "source" ? "Sources" : "Sinks" });
    for (const p of plugins.filter((x) => x.type === type)) group.append(h("option", { value: p.class }, pluginLabel(p)));
    classSelect.append(group);
  }
  classSelect.prepend(h("option", { value: "", disabled: true, selected: !editing }, "Choose a connector plugin…"));
  if (editing) {
    const given = config["connector.class"];
    const match = plugins.find((p) => p.class === given || p.class.split(".").pop() === given ||
      p.class.split(".").pop() === `${given}Connector`);
    if (!match) classSelect.append(h("option", { value: given }, given));
    classSelect.value = match ? match.class : given;
    for (const [k, v] of Object.entries(config)) if (!TOP.has(k)) values[k] = v;
  }

  function payload() {
    const extras = parseExtras(extrasArea.value).values;
    const out = { ...extras };
    for (const [k, v] of Object.entries(values)) if (v !== "" && !(k in extras)) out[k] = v;
    out["connector.class"] = classSelect.value;
    const name = nameInput.value.trim();
    if (name) out.name = name;
    return out;
  }

  function showErrors(result) {
    const errorsOf = new Map(result.configs.map((c) => [c.value.name, c.value.errors]));
    const seen = (key) => showAll || touched.has(key);
    let shown = 0;
    for (const [key, field] of [...fields, ["name", { error: nameError, box: nameError.closest(".field") }],
      ["connector.class", { error: classError, box: classError.closest(".field") }]]) {
      const errs = seen(key) ? errorsOf.get(key) || [] : [];
      field.error.textContent = errs.join(" ");
      field.box.classList.toggle("invalid", errs.length > 0);
      shown += errs.length;
    }
    const declared = new Set([...fields.keys(), ...TOP]);
    const bad = parseExtras(extrasArea.value).bad.map((l) => `Not key=value: ${l}`);
    const others = [...errorsOf].filter(([k, errs]) => !declared.has(k) && errs.length)
      .map(([k, errs]) => `${k}: ${errs.join(" ")}`);
    extrasError.textContent = [...bad, ...(seen("extras") ? others : [])].join("\n");
    const total = result.error_count + bad.length;
    validity.className = ["validity", total ? "bad" : "ok"].join(" ");
    validity.textContent = total ? `${total} problem${total === 1 ? "" : "s"}${shown < total && !showAll
      ? " (some in fields not filled in yet)" : ""}` : "The worker accepts this config";
  }

  async function validate() {
    if (!classSelect.value) return null;
    const mine = ++sequence;
    let result;
    try {
      result = await api("PUT", `connector-plugins/${seg(classSelect.value)}/config/validate`, payload());
    } catch (err) {
      if (mine === sequence && page.alive) {
        validity.className = "validity bad";
        validity.textContent = err.message;
      }
      return null;
    }
    if (mine !== sequence || !page.alive) return null; // a newer check is on its way
    showErrors(result);
    return result;
  }

  function later() {
    clearTimeout(timer);
    validity.className = "validity";
    validity.textContent = "Checking…";
    timer = setTimeout(validate, DEBOUNCE_MS);
  }

  function fieldFor(def, index) {
    const id = `f-${index}`;
    const key = def.name;
    let input;
    if (def.type === "BOOLEAN") {
      input = h("select", { id, name: key },
        h("option", { value: "" }, `default${def.default_value !== null ? ` (${def.default_value})` : ""}`),
        h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    } else {
      // A PASSWORD field's stored value comes back as [hidden]: left so, the worker keeps the stored one.
      input = h("input", { type: def.type === "PASSWORD" ? "password" : "text", id, name: key,
                           autocomplete: def.type === "PASSWORD" ? "new-password" : "off", spellcheck: "false",
                           placeholder: def.default_value ?? "",
                           inputmode: def.type === "INT" || def.type === "LONG" ? "numeric" : null });
    }
    input.value = values[key] ?? "";
    const onChange = () => {
      values[key] = input.value;
      touched.add(key);
      later();
    };
    input.addEventListener("input", onChange);
    input.addEventListener("change", onChange);
    const error = h("div", { class: "field-error", "data-error-for": key });
    const hint = def.type === "LIST" ? "LIST (comma-separated)" : def.type;
    const box = h("div", { class: "field", "data-field": key },
      h("label", { for: id }, key, def.required ? h("span", { class: "req" }, "*") : null,
        h("span", { class: "type" }, hint)),
      h("div", {}, input, def.documentation ? h("div", { class: "doc" }, def.documentation) : null, error));
    fields.set(key, { input, error, box });
    return box;
  }

  async function loadDefinitions() {
    fields = new Map();
    const cls = classSelect.value;
    if (!cls) {
      fill(groupsBox, h("section", { class: "panel" }, empty("Choose a connector plugin to see its settings.")));
      return;
    }
    fill(groupsBox, h("section", { class: "panel" }, empty("Loading the plugin's settings…")));
    let definitions;
    try {
      definitions = await get(`connector-plugins/${seg(cls)}/config`);
    } catch (err) {
      page.error(err);
      return;
    }
    if (!page.alive || classSelect.value !== cls) return;
    const byGroup = new Map();
    for (const def of definitions) {
      if (TOP.has(def.name)) continue;
      if (!byGroup.has(def.group)) byGroup.set(def.group, []);
      byGroup.get(def.group).push(def);
    }
    // The plugin's own settings first, then those every connector has (the rarely needed ones folded).
    const order = [...byGroup.keys()].sort((a, b) => (a === "Common") - (b === "Common"));
    let index = 0;
    const sections = order.map((group) => {
      const defs = byGroup.get(group);
      const common = group === "Common";
      const main = defs.filter((d) => !common || d.required || d.name === "tasks.max" || d.name in values);
      const rest = defs.filter((d) => !main.includes(d));
      return h("section", { class: "panel form-group", "data-group": group },
        h("h2", {}, common ? "Common settings" : `${group.replace(/Connector$/, "")} settings`),
        main.map((d) => fieldFor(d, index++)),
        rest.length ? h("details", { class: "more" }, h("summary", {}, `${rest.length} more common settings`),
          rest.map((d) => fieldFor(d, index++))) : null);
    });
    if (editing && !extrasArea.value) {
      const extras = Object.entries(config).filter(([k]) => !TOP.has(k) && !fields.has(k));
      extrasArea.value = extras.map(([k, v]) => `${k}=${v}`).join("\n");
      for (const [k] of extras) delete values[k];
    }
    fill(groupsBox, sections);
    await validate();
  }

  nameInput.addEventListener("input", () => { touched.add("name"); later(); });
  classSelect.addEventListener("change", () => { touched.add("connector.class"); loadDefinitions(); });
  extrasArea.addEventListener("input", () => { touched.add("extras"); later(); });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    showAll = true;
    clearTimeout(timer);
    if (!classSelect.value) {
      classError.textContent = "Choose a connector plugin.";
      classError.closest(".field").classList.add("invalid");
      return;
    }
    const result = await validate();
    if (!result) return;
    const bad = parseExtras(extrasArea.value).bad;
    if (result.error_count || bad.length) {
      const first = form.querySelector(".field.invalid input, .field.invalid select");
      if (first) first.focus();
      toast("Fix the fields marked in red first.", "error");
      return;
    }
    const name = existing || nameInput.value.trim();
    const body = payload();
    delete body.name;
    submit.disabled = true;
    try {
      await api("PUT", `connectors/${seg(name)}/config`, body);
      toast(editing ? `Saved ${name}` : `Created ${name}`);
      location.hash = `#/connectors/${seg(name)}`;
    } catch (err) {
      toast(err instanceof ApiError ? err.message : String(err), "error");
    } finally {
      submit.disabled = false;
    }
  });

  await loadDefinitions();
}
