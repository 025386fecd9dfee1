// The shardcat catalog explorer: a client of the public API, nothing else. Every list and detail
// comes from the API with the signed-in user's token, so the page shows exactly what that user may
// see. Every page has an address (#/table/main.sales.orders): reload, Back and a shared link work.
// Lists are paged (max_results, page_token): a 100,000-table schema loads a page at a time.
// All text from the API is put in the page as text (never as HTML).
"use strict";

const API = "/api/2.1/unity-catalog";
const CONTROL = "/api/1.0/unity-control";
const PAGE = 50;
const TOKEN_KEY = "shardcat.token";
const SVG_NS = "http://www.w3.org/2000/svg";

const state = { token: sessionStorage.getItem(TOKEN_KEY), me: null, shown: 0 };
const $ = (id) => document.getElementById(id);

// ---- the API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error_code;
  }
}

async function call(method, url, { json, form, token = state.token } = {}) {
  const headers = {};
  let body;
  if (token) headers.Authorization = `Bearer ${token}`;
  if (json !== undefined) { headers["Content-Type"] = "application/json"; body = JSON.stringify(json); }
  if (form !== undefined) { body = new URLSearchParams(form); }
  const answer = await fetch(url, { method, headers, body });
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new ApiError(answer.status, data);
  return data;
}

const api = (path, options) => call(options && options.method || "GET", API + path, options);
const enc = encodeURIComponent;

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  return q.toString();
}

// ---- building the page ----------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function when(ms) {
  return ms ? el("time", { datetime: new Date(ms).toISOString() },
    new Date(ms).toISOString().replace("T", " ").slice(0, 16) + " UTC") : "";
}

function errorNote(e) {
  return el("p", { class: "error", role: "alert" }, e instanceof ApiError ? `${e.code || e.status}: ${e.message}` : String(e));
}

function tagChips(tags) {
  // Tags as the API sends them: {key: value}; a key without a value shows alone.
  const entries = Object.entries(tags || {});
  return entries.length ? el("span", { class: "tags" }, entries.sort().map(([k, v]) =>
    el("span", { class: "tag", "data-key": k }, v ? `${k}: ${v}` : k))) : null;
}

// ---- addresses: one per page -----------------------------------------------------------------
// #/ (catalogs), #/catalog/<name>, #/schema/<c.s>, #/table/<c.s.t>, #/volume/..., #/function/...,
// #/model/..., #/search/<words>, #/requests (access requests).

const KINDS = ["catalog", "schema", "table", "volume", "function", "model"];

function href(kind, name) {
  return `#/${kind}/${enc(name)}`;
}

function link(kind, name, label, cls) {
  return el("a", { href: href(kind, name), class: cls || `node ${kind}`, "data-kind": kind }, label === undefined ? name : label);
}

function route() {
  const [, kind, ...rest] = location.hash.replace(/^#/, "").split("/");
  const name = decodeURIComponent(rest.join("/"));
  if (KINDS.includes(kind) && name) return showAsset(kind, name);
  if (kind === "search" && name) return search(name);
  if (kind === "requests") return showRequests();
  return showHome();
}

function page(...children) {
  // A new page: what an earlier, slower page still loads is dropped when it arrives.
  const detail = $("detail");
  detail.replaceChildren(...children);
  detail.scrollTop = 0;
  state.shown += 1;
  return state.shown;
}

const current = (shown) => shown === state.shown;

// ---- sign-in ----------------------------------------------------------------------------------

async function signIn(token) {
  state.me = await call("GET", API + "/user-info/me", { token });
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  showExplorer();
}

function showSignIn(message) {
  $("sign-in").hidden = false;
  $("explorer").hidden = true;
  $("search-form").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("sign-in-error").textContent = message || "";
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.me = null;
  showSignIn();
}

async function showExplorer() {
  $("sign-in").hidden = true;
  $("explorer").hidden = false;
  $("search-form").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = `signed in as ${state.me.name}`;
  api("/metastore_summary").then((summary) => {
    $("metastore").textContent = `metastore ${summary.name || summary.metastore_id}`;
  }, () => { $("metastore").textContent = ""; });
  const tree = $("tree");
  tree.replaceChildren();
  const list = el("ul", { class: "tree" });
  tree.append(el("h2", {}, "Catalogs"), list,
    el("p", { class: "nav-links" }, el("a", { href: "#/", class: "section" }, "All catalogs"), " · ",
      el("a", { href: "#/requests", class: "section", id: "requests-link" }, "Access requests")));
  pagedList(list, (token) => api(`/catalogs?${query({ max_results: PAGE, page_token: token })}`), "catalogs",
    (c) => branch("catalog", c.name, c.name, schemaChildren(c.name)));
  route();
}

// ---- the tree: paged lists, opened on demand --------------------------------------------------

async function pagedList(ul, fetchPage, key, render, token) {
  const loading = el("li", { class: "muted" }, "loading…");
  ul.append(loading);
  try {
    const page = await fetchPage(token);
    loading.remove();
    const items = page[key] || [];
    if (!items.length && !token) ul.append(el("li", { class: "muted empty" }, "none"));
    for (const item of items) ul.append(render(item));
    if (page.next_page_token) {
      const more = el("li", {}, el("button", {
        class: "more", type: "button",
        onclick: () => { more.remove(); pagedList(ul, fetchPage, key, render, page.next_page_token); },
      }, "more…"));
      ul.append(more);
    }
  } catch (e) {
    loading.replaceWith(el("li", {}, errorNote(e)));
  }
}

function branch(kind, label, fullName, children) {
  const sub = el("ul", { class: "tree", hidden: true });
  let loaded = false;
  const toggle = el("button", { class: "toggle", type: "button", "aria-expanded": "false", "aria-label": `expand ${label}` }, "▸");
  toggle.addEventListener("click", () => {
    const open = sub.hidden;
    sub.hidden = !open;
    toggle.textContent = open ? "▾" : "▸";
    toggle.setAttribute("aria-expanded", String(open));
    if (open && !loaded) { loaded = true; children(sub); }
  });
  const name = fullName ? link(kind, fullName, label) : el("span", { class: `node ${kind}` }, label);
  return el("li", {}, toggle, el("span", { class: `icon ${kind}` }), name, sub);
}

function leaf(kind, label, fullName, note) {
  return el("li", {}, el("span", { class: "toggle-space" }), el("span", { class: `icon ${kind}` }),
    link(kind, fullName, label), note ? el("span", { class: "muted note" }, note) : null);
}

function schemaChildren(catalog) {
  return (ul) => pagedList(ul,
    (token) => api(`/schemas?${query({ catalog_name: catalog, max_results: PAGE, page_token: token })}`), "schemas",
    (s) => branch("schema", s.name, s.full_name, (sub) => schemaSections(sub, catalog, s.name)));
}

const SECTIONS = [
  // label, list path, answer key, page kind
  ["Tables and views", "/tables", "tables", "table"],
  ["Volumes", "/volumes", "volumes", "volume"],
  ["Functions", "/functions", "functions", "function"],
  ["Models", "/models", "registered_models", "model"],
];

const isView = (a) => a.table_type === "VIEW" || a.table_type === "MATERIALIZED_VIEW" || a.table_type === "METRIC_VIEW";

function sectionFetcher(path, catalog, schema) {
  return (token) => api(`${path}?${query({ catalog_name: catalog, schema_name: schema, max_results: PAGE, page_token: token })}`);
}

function schemaSections(ul, catalog, schema) {
  for (const [label, path, key, kind] of SECTIONS) {
    const section = branch("section", label, null, (sub) => pagedList(sub, sectionFetcher(path, catalog, schema), key,
      (a) => leaf(isView(a) ? "view" : kind, a.name, a.full_name || `${catalog}.${schema}.${a.name}`, isView(a) ? "view" : null)));
    section.querySelector(".node").classList.add("section");
    ul.append(section);
  }
}

// ---- pages ---------------------------------------------------------------------------------------

const GET_PATH = { catalog: "/catalogs/", schema: "/schemas/", table: "/tables/", volume: "/volumes/",
  function: "/functions/", model: "/models/" };
const SECURABLE = { catalog: "catalog", schema: "schema", table: "table", volume: "volume", function: "function",
  model: "registered_model" };
const TAG_ENTITY = { catalog: "catalogs", schema: "schemas", table: "tables", volume: "volumes", function: "functions",
  model: "registered_models" };
const PRIVILEGES = { catalog: ["USE_CATALOG", "BROWSE", "CREATE_SCHEMA", "SELECT", "ALL_PRIVILEGES"],
  schema: ["USE_SCHEMA", "BROWSE", "SELECT", "CREATE_TABLE", "CREATE_VOLUME", "CREATE_FUNCTION", "CREATE_MODEL", "ALL_PRIVILEGES"],
  table: ["SELECT", "MODIFY", "ALL_PRIVILEGES"], volume: ["READ_VOLUME", "WRITE_VOLUME", "ALL_PRIVILEGES"],
  function: ["EXECUTE", "ALL_PRIVILEGES"], model: ["EXECUTE", "APPLY_TAG", "ALL_PRIVILEGES"] };
// What "Request access" asks for, by kind: reading it.
const READ_PRIVILEGE = { catalog: "USE_CATALOG", schema: "USE_SCHEMA", table: "SELECT", volume: "READ_VOLUME",
  function: "EXECUTE", model: "EXECUTE" };

function card(title, ...body) {
  return el("section", { class: "card", "data-card": title }, el("h3", {}, title), ...body);
}

function keyValues(rows) {
  return el("dl", { class: "facts" }, rows.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function grid(headers, rows, cls) {
  return el("div", { class: "scroll" }, el("table", { class: cls || "grid" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))))));
}

function mayManage(asset) {
  const me = state.me;
  return me.is_account_admin || me.is_metastore_admin || asset.owner === me.name || (me.groups || []).includes(asset.owner);
}

function showHome() {
  const list = el("ul", { class: "children", "data-list": "catalogs" });
  const shown = page(el("h1", {}, "Catalogs"), card("Catalogs", list), createForm("catalog", null));
  if (!current(shown)) return;
  pagedList(list, (token) => api(`/catalogs?${query({ max_results: PAGE, page_token: token })}`), "catalogs",
    (c) => childItem("catalog", c));
}

function childItem(kind, a) {
  const k = kind === "table" && isView(a) ? "view" : kind;
  return el("li", {}, el("span", { class: `icon ${k}` }), link(kind, a.full_name || a.name, a.name, "child"),
    k === "view" ? el("span", { class: "muted note" }, "view") : null,
    a.comment ? el("span", { class: "muted note" }, a.comment) : null, tagChips(a.tags));
}

function createForm(kind, parent) {
  // Creating a catalog (on the home page) or a schema (in a catalog): the API decides who may.
  const name = el("input", { name: "name", placeholder: `${kind} name`, required: true, "aria-label": `${kind} name` });
  const comment = el("input", { name: "comment", placeholder: "comment (optional)", "aria-label": "comment" });
  const note = el("span", { class: "muted note-line" });
  const form = el("form", { class: "inline create", "data-create": kind, onsubmit: async (e) => {
    e.preventDefault();
    const body = { name: name.value.trim(), comment: comment.value.trim() || undefined };
    if (kind === "schema") body.catalog_name = parent;
    try {
      const made = await api(kind === "catalog" ? "/catalogs" : "/schemas", { method: "POST", json: body });
      location.hash = href(kind, made.full_name || made.name);
      if (kind === "catalog") showExplorer();
    } catch (err) {
      note.replaceChildren(errorNote(err));
    }
  } }, name, comment, el("button", { type: "submit" }, `Create ${kind}`), note);
  return card(`New ${kind}`, form);
}

async function showAsset(kind, fullName) {
  const shown = page(el("p", { class: "muted" }, "loading…"));
  let asset;
  try {
    asset = await api(GET_PATH[kind] + enc(fullName));
  } catch (e) {
    if (current(shown)) page(el("h1", {}, fullName), errorNote(e));
    return;
  }
  if (!current(shown)) return;
  const view = kind === "table" && isView(asset);
  const icon = view ? "view" : kind;
  const name = asset.full_name || asset.name;
  const detail = $("detail");
  detail.replaceChildren(
    breadcrumbs(kind, name),
    el("h1", {}, el("span", { class: `icon ${icon}` }), name),
    el("p", { class: "muted kind" }, (view ? "view" : kind) + (asset.table_type && !view ? ` · ${asset.table_type}` : "")
      + (asset.data_source_format ? ` · ${asset.data_source_format}` : "")),
    asset.comment ? el("p", { class: "comment" }, asset.comment) : el("p", { class: "comment muted none" }, "No comment."),
    card("Overview", keyValues([
      ["Owner", asset.owner], ["Storage location", asset.storage_location || asset.storage_root],
      ["Created", asset.created_at ? el("span", {}, when(asset.created_at), asset.created_by ? ` by ${asset.created_by}` : "") : ""],
      ["Updated", asset.updated_at ? el("span", {}, when(asset.updated_at), asset.updated_by ? ` by ${asset.updated_by}` : "") : ""],
      ["Volume type", asset.volume_type], ["Returns", asset.data_type || asset.full_data_type],
    ])),
  );
  const manage = mayManage(asset);
  if (manage) detail.append(editCard(kind, asset));
  detail.append(card("Tags", tagChips(asset.tags) || el("p", { class: "muted" }, "No tags."), manage ? tagForm(kind, name) : null));
  if (kind === "catalog") detail.append(childrenCard("Schemas", "/schemas", { catalog_name: name }, "schemas", "schema"),
    createForm("schema", name));
  if (kind === "schema") {
    const [catalog, schema] = [asset.catalog_name, asset.name];
    for (const [label, path, key, k] of SECTIONS) {
      detail.append(childrenCard(label, path, { catalog_name: catalog, schema_name: schema }, key, k));
    }
  }
  if (kind === "table") {
    const governance = card("Sample data");
    detail.append(columnsCard(asset), governance);
    if (view && asset.view_definition) detail.append(card("View definition", el("pre", { class: "sql" }, asset.view_definition)));
    showSample(governance, asset);
  }
  const props = asset.properties || {};
  if (Object.keys(props).length) {
    detail.append(card("Properties", grid(["Key", "Value"], Object.entries(props).sort().map(([k, v]) => [k, String(v)]))));
  }
  if (kind === "table" || kind === "volume") {
    const lineage = card("Lineage");
    detail.append(lineage);
    showLineage(lineage, kind, name);
  }
  if (kind === "table" && (asset.columns || []).length) detail.append(columnLineageCard(name, asset.columns));
  if (kind === "table") {
    const alerts = card("Monitor alerts");
    detail.append(alerts);
    showAlerts(alerts, name);
  }
  const grants = card("Grants");
  detail.append(grants);
  showGrants(grants, kind, asset);
  if (["catalog", "schema", "table", "volume", "function", "model"].includes(kind)) {
    const history = card("History");
    detail.append(history);
    showHistory(history, kind, name);
  }
  const audit = card("Audit trail");
  detail.append(audit);
  showAudit(audit, name);
}

function breadcrumbs(kind, name) {
  const parts = name.split(".");
  const crumbs = [el("a", { href: "#/" }, "Catalogs")];
  if (parts.length > 1 || kind !== "catalog") crumbs.push(" › ", link("catalog", parts[0], parts[0], "crumb"));
  if (parts.length > 2) crumbs.push(" › ", link("schema", `${parts[0]}.${parts[1]}`, parts[1], "crumb"));
  return el("nav", { class: "crumbs", "aria-label": "breadcrumbs" }, crumbs);
}

function childrenCard(title, path, params, key, kind) {
  const list = el("ul", { class: "children", "data-list": key });
  pagedList(list, (token) => api(`${path}?${query({ ...params, max_results: PAGE, page_token: token })}`), key,
    (a) => childItem(kind, a));
  return card(title, list);
}

function columnsCard(table) {
  const body = el("div", {});
  const draw = (sample) => {
    const masked = new Set((sample && sample.masked_columns) || []);
    const rows = (table.columns || []).map((c, i) => [String(i + 1),
      el("span", {}, c.name, masked.has(c.name) ? el("span", { class: "badge mask", title: "a column mask applies" }, "masked") : null),
      c.type_text || c.type_name, c.nullable === false ? "no" : "yes", c.comment || "", tagChips(c.tags) || ""]);
    const filter = sample && sample.row_filter ? [el("p", { class: "badge-line" },
      el("span", { class: "badge filter" }, "row filter"), " Rows of this table are filtered for readers.")] : [];
    body.replaceChildren(...filter, grid(["#", "Name", "Type", "Nullable", "Comment", "Tags"], rows, "grid columns"));
  };
  draw(null);
  table.redrawColumns = draw;
  return card("Columns", body);
}

async function showSample(cardNode, table) {
  let sample;
  try {
    sample = await api(`/shardcat/sample/${enc(table.full_name)}?max_rows=20`);
  } catch (e) {
    cardNode.append(errorNote(e));
    return;
  }
  table.redrawColumns(sample);
  if (sample.rows) {
    const shownValue = (v) => (v === null ? el("span", { class: "muted" }, "NULL") : typeof v === "object" ? JSON.stringify(v) : String(v));
    cardNode.append(grid(sample.columns, sample.rows.map((r) => r.map(shownValue)), "grid sample"),
      el("p", { class: "muted" }, sample.truncated ? `The first ${sample.rows.length} rows.` : `${sample.rows.length} rows.`));
    return;
  }
  cardNode.append(el("p", { class: "muted no-sample" }, sample.reason || "No sample."));
  if (!sample.readable) cardNode.append(requestAccessForm("table", table.full_name, "SELECT"));
}

function requestAccessForm(kind, fullName, privilege) {
  const reason = el("input", { name: "reason", placeholder: "why (optional)", "aria-label": "reason" });
  const note = el("span", { class: "muted note-line" });
  return el("form", { class: "inline request-access", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("/shardcat/access-requests", { method: "POST", json: {
        securable_type: SECURABLE[kind], full_name: fullName, privileges: [privilege], reason: reason.value.trim() } });
      note.textContent = `Requested ${privilege}; the owner decides (see Access requests).`;
    } catch (err) {
      note.replaceChildren(errorNote(err));
    }
  } }, reason, el("button", { type: "submit", class: "request-button" }, `Request ${privilege.replace("_", " ")} access`), note);
}

function editCard(kind, asset) {
  const name = asset.full_name || asset.name;
  const comment = el("input", { name: "comment", value: asset.comment || "", "aria-label": "comment", class: "wide" });
  const owner = el("input", { name: "owner", value: asset.owner || "", "aria-label": "owner" });
  const note = el("span", { class: "muted note-line" });
  const form = el("form", { class: "inline edit", onsubmit: async (e) => {
    e.preventDefault();
    const change = {};
    if (comment.value !== (asset.comment || "")) change.comment = comment.value;
    if (owner.value.trim() && owner.value.trim() !== asset.owner) change.owner = owner.value.trim();
    if (!Object.keys(change).length) { note.textContent = "Nothing changed."; return; }
    try {
      await api(GET_PATH[kind] + enc(name), { method: "PATCH", json: change });
      showAsset(kind, name);
    } catch (err) {
      note.replaceChildren(errorNote(err));
    }
  } }, el("label", {}, "Comment ", comment), el("label", {}, "Owner ", owner), el("button", { type: "submit" }, "Save"), note);
  return card("Edit", form);
}

function tagForm(kind, name) {
  const key = el("input", { name: "tag_key", placeholder: "key", required: true, "aria-label": "tag key" });
  const value = el("input", { name: "tag_value", placeholder: "value", "aria-label": "tag value" });
  const note = el("span", { class: "muted note-line" });
  const tagPath = (k) => `/entity-tag-assignments/${TAG_ENTITY[kind]}/${enc(name)}/tags/${enc(k)}`;
  const act = async (remove) => {
    const k = key.value.trim();
    if (!k) { note.textContent = "Name a key."; return; }
    try {
      if (remove) await api(tagPath(k), { method: "DELETE" });
      else {
        try {
          await api("/entity-tag-assignments", { method: "POST", json: { entity_type: TAG_ENTITY[kind], entity_name: name,
            tag_key: k, tag_value: value.value } });
        } catch (err) {
          if (err.code !== "ALREADY_EXISTS") throw err;
          await api(tagPath(k), { method: "PATCH", json: { tag_value: value.value } });
        }
      }
      showAsset(kind, name);
    } catch (err) {
      note.replaceChildren(errorNote(err));
    }
  };
  return el("form", { class: "inline tag-form", onsubmit: (e) => { e.preventDefault(); act(false); } },
    key, value, el("button", { type: "submit" }, "Set tag"), el("button", { type: "button", onclick: () => act(true) }, "Remove tag"), note);
}

async function showGrants(cardNode, kind, asset) {
  const path = `/permissions/${SECURABLE[kind]}/${enc(asset.full_name || asset.name)}`;
  const body = el("div", {}, el("p", { class: "muted" }, "loading…"));
  cardNode.append(body);
  const render = async () => {
    try {
      const answer = await api(path);
      const rows = (answer.privilege_assignments || []).map((a) => [a.principal, a.privileges.join(", ")]);
      body.replaceChildren(rows.length ? grid(["Principal", "Privileges"], rows, "grid grants") : el("p", { class: "muted" }, "No grants."));
    } catch (e) {
      body.replaceChildren(errorNote(e));
    }
  };
  await render();
  if (!mayManage(asset)) {
    if (kind !== "table") cardNode.append(requestAccessForm(kind, asset.full_name || asset.name, READ_PRIVILEGE[kind]));
    return;
  }
  const principal = el("input", { name: "principal", placeholder: "principal", required: true, "aria-label": "principal" });
  const privilege = el("select", { name: "privilege", "aria-label": "privilege" },
    (PRIVILEGES[kind] || ["ALL_PRIVILEGES"]).map((p) => el("option", { value: p }, p)));
  const note = el("span", { class: "muted" });
  const change = async (add) => {
    if (!principal.value.trim()) { note.textContent = "Name a principal."; return; }
    const item = { principal: principal.value.trim(), add: add ? [privilege.value] : [], remove: add ? [] : [privilege.value] };
    try {
      await api(path, { method: "PATCH", json: { changes: [item] } });
      note.textContent = `${add ? "Granted" : "Revoked"} ${privilege.value} ${add ? "to" : "from"} ${item.principal}.`;
      await render();
    } catch (e) {
      note.replaceChildren(errorNote(e));
    }
  };
  cardNode.append(el("form", { class: "grant", onsubmit: (e) => { e.preventDefault(); change(true); } },
    principal, privilege, el("button", { type: "submit", class: "grant-button" }, "Grant"),
    el("button", { type: "button", class: "revoke-button", onclick: () => change(false) }, "Revoke"), note));
}

async function showHistory(cardNode, kind, fullName) {
  try {
    const answer = await api(`/shardcat/history/${SECURABLE[kind]}/${enc(fullName)}`);
    const versions = (answer.versions || []).slice(-20).reverse();
    const what = (v, i, all) => (v.dropped ? "dropped" : i === all.length - 1 && (answer.versions || []).length <= 20 ? "created" : "changed");
    cardNode.append(grid(["Version", "When", "Who", "What"],
      versions.map((v, i, all) => [String(v.version), when(v.changed_at), v.changed_by || "", what(v, i, all)]), "grid history"));
  } catch (e) {
    cardNode.append(el("p", { class: "muted" }, e.message));
  }
}

function auditStatus(e) {
  // A row of a batched decision (resolve, credentials) has no HTTP status: say allowed or refused.
  const verdict = e.allowed ? "allowed" : "refused";
  return [e.status ? String(e.status) : null, e.status ? null : verdict, e.error_code].filter(Boolean).join(" · ");
}

async function showAudit(cardNode, fullName) {
  try {
    // Others' actions: the page's own reads (this very page's requests among them) are left out.
    const answer = await api(`/shardcat/audit?${query({ securable: fullName, max_results: 20, omit_own_reads: "true" })}`);
    const events = answer.events || [];
    cardNode.append(events.length
      ? grid(["When", "Principal", "Action", "Status"], events.map((e) => [when(e.at), e.principal || "", e.action, auditStatus(e)]), "grid audit")
      : el("p", { class: "muted" }, "No events besides your own reads."));
  } catch (e) {
    cardNode.append(el("p", { class: "muted" }, e.status === 403 ? "Only metastore and account admins may read the audit trail." : e.message));
  }
}

// ---- access requests -----------------------------------------------------------------------------

async function showRequests() {
  const shown = page(el("h1", {}, "Access requests"), el("p", { class: "muted" }, "loading…"));
  let answer;
  try {
    answer = await api("/shardcat/access-requests");
  } catch (e) {
    if (current(shown)) page(el("h1", {}, "Access requests"), errorNote(e));
    return;
  }
  if (!current(shown)) return;
  const me = state.me.name;
  const mine = answer.access_requests.filter((r) => r.requested_by === me);
  const toDecide = answer.access_requests.filter((r) => r.requested_by !== me);
  const kindOf = (r) => ({ REGISTERED_MODEL: "model" }[r.securable_type] || r.securable_type.toLowerCase());
  const row = (r, decide) => [link(kindOf(r), r.full_name, r.full_name, "result"), r.privileges.join(", "), r.requested_by,
    r.reason || "", when(r.requested_at), el("span", { class: `state ${r.state.toLowerCase()}` }, r.state),
    decide && r.state === "PENDING" ? el("span", { class: "decide" },
      el("button", { type: "button", class: "approve-button", onclick: () => decideRequest(r, "APPROVED") }, "Approve"),
      el("button", { type: "button", class: "decline-button", onclick: () => decideRequest(r, "DECLINED") }, "Decline"))
      : r.decided_by ? `by ${r.decided_by}` : ""];
  const headers = ["Asset", "Privileges", "Requested by", "Reason", "When", "State", ""];
  page(el("h1", {}, "Access requests"),
    card("To decide", toDecide.length ? grid(headers, toDecide.map((r) => row(r, true)), "grid requests to-decide")
      : el("p", { class: "muted" }, "No requests on what you manage.")),
    card("Yours", mine.length ? grid(headers, mine.map((r) => row(r, false)), "grid requests mine")
      : el("p", { class: "muted" }, "You have asked for nothing.")));
}

async function decideRequest(r, decision) {
  try {
    await api(`/shardcat/access-requests/${enc(r.id)}`, { method: "PATCH", json: { state: decision } });
    showRequests();
  } catch (e) {
    $("detail").append(errorNote(e));
  }
}

// ---- lineage as a picture ------------------------------------------------------------------------

// ---- freshness and volume alerts (catalog/features/monitors.py) ------------------------------------

async function showAlerts(cardNode, fullName) {
  let answer;
  try {
    answer = await api(`/shardcat/monitors/alerts?${query({ table: fullName })}`);
  } catch (e) {
    cardNode.append(errorNote(e));
    return;
  }
  const alerts = answer.alerts || [];
  if (!alerts.length) {
    cardNode.append(el("p", { class: "muted" }, "No alerts: on time, usual volumes (or no monitor)."));
    return;
  }
  cardNode.append(grid(["Raised", "Kind", "Expected", "Observed"],
    alerts.slice().reverse().map((a) => [a.raised, a.kind, a.expected, a.observed]), "grid alerts"));
}

async function showLineage(cardNode, kind, fullName) {
  let answer;
  try {
    answer = await api(`/shardcat/lineage?${query({ name: fullName, securable_type: kind.toUpperCase(), direction: "both", depth: 3 })}`);
  } catch (e) {
    cardNode.append(errorNote(e));
    return;
  }
  if (!answer.edges.length) {
    cardNode.append(el("p", { class: "muted" }, "No lineage recorded."));
    return;
  }
  cardNode.append(el("div", { class: "scroll" }, lineagePicture(answer)));
  if (answer.truncated) cardNode.append(el("p", { class: "muted" }, "Only the nearest part of the graph is shown."));
}

function lineagePicture(answer) {
  // Columns by distance: upstream to the left of the asset, downstream to the right.
  const nodes = new Map();
  let hidden = 0;
  const key = (n) => (n.hidden ? `hidden-${hidden++}` : n.id);
  const place = (n, column) => {
    const id = key(n);
    if (!nodes.has(id)) nodes.set(id, { ...n, id, column });
    return id;
  };
  const root = place(answer.securable, 0);
  const edges = answer.edges.map((e) => {
    const up = e.direction === "upstream";
    const source = place(e.source, up ? -e.hops : e.hops - 1);
    const target = place(e.target, up ? -e.hops + 1 : e.hops);
    return [source, target];
  });
  const columns = new Map();
  for (const n of nodes.values()) {
    if (!columns.has(n.column)) columns.set(n.column, []);
    n.row = columns.get(n.column).push(n) - 1;
  }
  const order = [...columns.keys()].sort((a, b) => a - b);
  const W = 250, H = 36, GX = 60, GY = 16;
  const rows = Math.max(...[...columns.values()].map((c) => c.length));
  const width = order.length * (W + GX) - GX + 20, height = rows * (H + GY) - GY + 20;
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "lineage");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "lineage graph");
  const shape = (tag, attrs, text) => {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  const at = (n) => {
    const count = columns.get(n.column).length;
    const offset = (rows - count) * (H + GY) / 2;
    return { x: 10 + order.indexOf(n.column) * (W + GX), y: 10 + offset + n.row * (H + GY) };
  };
  const defs = shape("defs", {});
  const marker = document.createElementNS(SVG_NS, "marker");
  for (const [k, v] of Object.entries({ id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto" })) marker.setAttribute(k, v);
  const tip = document.createElementNS(SVG_NS, "path");
  tip.setAttribute("d", "M 0 0 L 10 5 L 0 10 z");
  marker.append(tip);
  defs.append(marker);
  for (const [s, t] of edges) {
    const a = at(nodes.get(s)), b = at(nodes.get(t));
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    shape("path", { d: `M ${x1} ${y1} C ${x1 + GX / 2} ${y1}, ${x2 - GX / 2} ${y2}, ${x2} ${y2}`, class: "edge", "marker-end": "url(#arrow)" });
  }
  for (const n of nodes.values()) {
    const p = at(n);
    const cls = n.id === root ? "node root" : n.hidden ? "node hidden" : n.deleted ? "node deleted" : "node";
    const group = shape("g", { class: cls, "data-name": n.hidden ? "hidden" : n.full_name });
    const rect = document.createElementNS(SVG_NS, "rect");
    for (const [k, v] of Object.entries({ x: p.x, y: p.y, width: W, height: H, rx: 6 })) rect.setAttribute(k, v);
    const label = document.createElementNS(SVG_NS, "text");
    label.setAttribute("x", p.x + 10);
    label.setAttribute("y", p.y + H / 2 + 4);
    const name = n.hidden ? "hidden (no access)" : n.full_name + (n.deleted ? " (deleted)" : "");
    label.textContent = name.length > 36 ? "…" + name.slice(-35) : name;
    const title = document.createElementNS(SVG_NS, "title");
    title.textContent = name;
    group.append(rect, label, title);
    if (!n.hidden && !n.deleted && n.id !== root) {
      group.addEventListener("click", () => { location.hash = href(TYPE_OF[n.securable_type] || "table", n.full_name); });
    }
  }
  return svg;
}

// ---- column lineage: asked for only when the card is opened, a few columns at a time ----------------

const LINEAGE_TRACKING = "/api/2.0/lineage-tracking";
const COLUMN_BATCH = 20;

function columnLineageCard(fullName, columns) {
  // One request per column, only once the user opens the card, and only COLUMN_BATCH columns at a
  // time ("more…" asks for the next ones): a wide table's page loads no faster or slower for it.
  const list = el("ul", { class: "column-lineage" });
  const box = el("details", { class: "column-lineage" },
    el("summary", {}, `Upstream and downstream of each column (${columns.length})`), list);
  let next = 0;
  const load = () => {
    const batch = columns.slice(next, next + COLUMN_BATCH);
    next += batch.length;
    for (const c of batch) list.append(columnLineageItem(fullName, c.name));
    if (next < columns.length) {
      const more = el("li", {}, el("button", { class: "more", type: "button",
        onclick: () => { more.remove(); load(); } }, `more… (${columns.length - next} columns left)`));
      list.append(more);
    }
  };
  box.addEventListener("toggle", () => { if (box.open && next === 0) load(); });
  return card("Column lineage", box);
}

function columnLineageItem(fullName, column) {
  const body = el("span", { class: "muted" }, "loading…");
  const item = el("li", { "data-column": column }, el("span", { class: "column-name" }, column), " ", body);
  call("GET", `${LINEAGE_TRACKING}/column-lineage?${query({ table_name: fullName, column_name: column })}`).then((answer) => {
    const ups = answer.upstream_cols || [], downs = answer.downstream_cols || [];
    if (!ups.length && !downs.length) {
      body.replaceWith(el("span", { class: "muted none" }, "no column lineage recorded"));
      return;
    }
    body.replaceWith(el("ul", { class: "column-edges" },
      ups.map((u) => el("li", { class: "upstream" }, "← ", columnRef(u))),
      downs.map((d) => el("li", { class: "downstream" }, "→ ", columnRef(d)))));
  }, (e) => body.replaceWith(errorNote(e)));
  return item;
}

function columnRef(c) {
  // upstream.table.col, linked to its table's (or volume's) page; one the user may not read is hidden.
  if (c.hidden) return el("span", { class: "muted hidden" }, "hidden (no access)");
  const table = `${c.catalog_name}.${c.schema_name}.${c.table_name}`;
  const kind = c.table_type === "VOLUME" ? "volume" : "table";
  return el("span", { class: "column-ref" }, link(kind, table, table, "column-table"), `.${c.name}`);
}

// ---- search --------------------------------------------------------------------------------------

const TYPE_OF = { TABLE: "table", SCHEMA: "schema", CATALOG: "catalog", VOLUME: "volume", FUNCTION: "function",
  REGISTERED_MODEL: "model" };

function search(words) {
  const list = el("ul", { class: "results" });
  const shown = page(el("h1", {}, `Search: ${words}`), list);
  if ($("search").value !== words) $("search").value = words;
  pagedList(list, (t) => api(`/shardcat/search?${query({ query: words, max_results: PAGE, page_token: t })}`), "results",
    (r) => current(shown) ? el("li", {}, el("span", { class: `icon ${TYPE_OF[r.securable_type] || "table"}` }),
      link(TYPE_OF[r.securable_type] || "table", r.full_name, r.full_name, "result"),
      el("span", { class: "muted note" }, r.securable_type.toLowerCase() + (r.comment ? ` · ${r.comment}` : ""))) : "");
}

// ---- the identity provider's login: authorization code with PKCE (RFC 7636), a public client ----

const LOGIN_KEY = "shardcat.login";

function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function startProviderLogin(settings) {
  const verifier = randomText(), stateText = randomText();
  const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify({ verifier, state: stateText }));
  const url = new URL(settings.authorization_endpoint);
  for (const [k, v] of Object.entries({ response_type: "code", client_id: settings.client_id, scope: settings.scope,
    redirect_uri: location.origin + "/", state: stateText, code_challenge: challenge, code_challenge_method: "S256" })) {
    url.searchParams.set(k, v);
  }
  location.assign(url.toString());
}

async function finishProviderLogin(settings, params) {
  // Back from the provider with a code: trade it (and the verifier) for the provider's tokens, then
  // the provider's token for a shardcat token.
  const started = JSON.parse(sessionStorage.getItem(LOGIN_KEY) || "null");
  sessionStorage.removeItem(LOGIN_KEY);
  history.replaceState(null, "", "/");
  if (!started || params.get("state") !== started.state) throw new Error("The sign-in did not start here; try again.");
  const answer = await fetch(settings.token_endpoint, { method: "POST", body: new URLSearchParams({
    grant_type: "authorization_code", code: params.get("code"), redirect_uri: location.origin + "/",
    client_id: settings.client_id, code_verifier: started.verifier }) });
  const tokens = await answer.json().catch(() => ({}));
  if (!answer.ok || !(tokens.id_token || tokens.access_token)) throw new Error("The identity provider refused the sign-in.");
  const subject = tokens.id_token || tokens.access_token;
  const exchanged = await call("POST", CONTROL + "/auth/tokens", { token: null, form: {
    grant_type: "urn:ietf:params:oauth:grant-type:token-exchange", subject_token: subject,
    subject_token_type: tokens.id_token ? "urn:ietf:params:oauth:token-type:id_token" : "urn:ietf:params:oauth:token-type:access_token",
    requested_token_type: "urn:ietf:params:oauth:token-type:access_token" } });
  await signIn(exchanged.access_token);
}

async function providerSettings() {
  try {
    const answer = await fetch("/explorer/sign-in.json");
    return answer.ok ? await answer.json() : {};
  } catch (e) {
    return {};
  }
}

// ---- start ---------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await signIn($("token").value.trim());
      $("token").value = "";
    } catch (err) {
      showSignIn(err.status === 401 ? "That token is not valid." : err.message);
    }
  });
  $("idp-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const answer = await call("POST", CONTROL + "/auth/tokens", { token: null, form: {
        grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
        subject_token: $("idp-token").value.trim(),
        subject_token_type: "urn:ietf:params:oauth:token-type:access_token",
        requested_token_type: "urn:ietf:params:oauth:token-type:access_token",
      } });
      $("idp-token").value = "";
      await signIn(answer.access_token);
    } catch (err) {
      showSignIn(err.message);
    }
  });
  $("sign-out").addEventListener("click", signOut);
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const words = $("search").value.trim();
    if (words) location.hash = `#/search/${enc(words)}`;
  });
  window.addEventListener("hashchange", () => { if (state.me) route(); });
  start();
});

async function start() {
  const settings = await providerSettings();
  if (settings.authorization_endpoint) {
    $("idp-login-box").hidden = false;
    $("idp-login").addEventListener("click", () => startProviderLogin(settings).catch((e) => showSignIn(e.message)));
  }
  const params = new URLSearchParams(location.search);
  if (params.get("code") && settings.token_endpoint) {
    try {
      await finishProviderLogin(settings, params);
    } catch (e) {
      showSignIn(e.message);
    }
    return;
  }
  if (params.get("error")) {
    history.replaceState(null, "", "/");
    showSignIn(`The identity provider said: ${params.get("error_description") || params.get("error")}`);
    return;
  }
  if (state.token) signIn(state.token).catch(() => showSignIn());
  else showSignIn();
}
