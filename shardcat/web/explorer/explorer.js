// The shardcat catalog explorer: a client of the public API, nothing else. Every list and detail
// comes from the API with the signed-in user's token, so the page shows exactly what that user may
// see. Lists are paged (max_results, page_token): a 100,000-table schema loads a page at a time.
// All text from the API is put in the page as text (never as HTML).
"use strict";

const API = "/api/2.1/unity-catalog";
const CONTROL = "/api/1.0/unity-control";
const PAGE = 50;
const TOKEN_KEY = "shardcat.token";
const SVG_NS = "http://www.w3.org/2000/svg";

const state = { token: sessionStorage.getItem(TOKEN_KEY), me: null };
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
  return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
}

function errorNote(e) {
  return el("p", { class: "error", role: "alert" }, e instanceof ApiError ? `${e.code || e.status}: ${e.message}` : String(e));
}

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
  try {
    const summary = await api("/metastore_summary");
    $("metastore").textContent = `metastore ${summary.name || summary.metastore_id}`;
  } catch (e) {
    $("metastore").textContent = "";
  }
  const tree = $("tree");
  tree.replaceChildren();
  const list = el("ul", { class: "tree" });
  tree.append(el("h2", {}, "Catalogs"), list);
  pagedList(list, (token) => api(`/catalogs?${query({ max_results: PAGE, page_token: token })}`), "catalogs",
    (c) => branch("catalog", c.name, schemaChildren(c.name), () => showAsset("catalog", c.name)));
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
        class: "more", onclick: () => { more.remove(); pagedList(ul, fetchPage, key, render, page.next_page_token); },
      }, "more…"));
      ul.append(more);
    }
  } catch (e) {
    loading.replaceWith(el("li", {}, errorNote(e)));
  }
}

function branch(kind, label, children, onSelect) {
  const sub = el("ul", { class: "tree", hidden: true });
  let loaded = false;
  const toggle = el("button", { class: "toggle", "aria-expanded": "false", "aria-label": `expand ${label}` }, "▸");
  toggle.addEventListener("click", () => {
    const open = sub.hidden;
    sub.hidden = !open;
    toggle.textContent = open ? "▾" : "▸";
    toggle.setAttribute("aria-expanded", String(open));
    if (open && !loaded) { loaded = true; children(sub); }
  });
  const name = el("a", { href: "#", class: `node ${kind}`, "data-kind": kind, onclick: (e) => { e.preventDefault(); onSelect(); } }, label);
  return el("li", {}, toggle, el("span", { class: `icon ${kind}` }), name, sub);
}

function leaf(kind, label, onSelect, note) {
  return el("li", {}, el("span", { class: "toggle-space" }), el("span", { class: `icon ${kind}` }),
    el("a", { href: "#", class: `node ${kind}`, "data-kind": kind, onclick: (e) => { e.preventDefault(); onSelect(); } }, label),
    note ? el("span", { class: "muted note" }, note) : null);
}

function schemaChildren(catalog) {
  return (ul) => pagedList(ul,
    (token) => api(`/schemas?${query({ catalog_name: catalog, max_results: PAGE, page_token: token })}`), "schemas",
    (s) => branch("schema", s.name, (sub) => schemaSections(sub, catalog, s.name), () => showAsset("schema", s.full_name)));
}

const SECTIONS = [
  // label, list path, answer key, type for details
  ["Tables and views", "/tables", "tables", "table"],
  ["Volumes", "/volumes", "volumes", "volume"],
  ["Functions", "/functions", "functions", "function"],
  ["Models", "/models", "registered_models", "model"],
];

function schemaSections(ul, catalog, schema) {
  for (const [label, path, key, type] of SECTIONS) {
    const section = branch("section", label, (sub) => pagedList(sub,
      (token) => api(`${path}?${query({ catalog_name: catalog, schema_name: schema, max_results: PAGE, page_token: token })}`), key,
      (a) => leaf(a.table_type === "VIEW" ? "view" : type, a.name, () => showAsset(type, a.full_name || `${catalog}.${schema}.${a.name}`),
        a.table_type === "VIEW" ? "view" : null)), () => {});
    section.querySelector("a").classList.add("section");
    ul.append(section);
  }
}

// ---- details ------------------------------------------------------------------------------------

const GET_PATH = { catalog: "/catalogs/", schema: "/schemas/", table: "/tables/", volume: "/volumes/",
  function: "/functions/", model: "/models/" };
const SECURABLE = { catalog: "catalog", schema: "schema", table: "table", volume: "volume", function: "function",
  model: "registered_model" };
const PRIVILEGES = { catalog: ["USE_CATALOG", "CREATE_SCHEMA", "ALL_PRIVILEGES"],
  schema: ["USE_SCHEMA", "CREATE_TABLE", "CREATE_VOLUME", "CREATE_FUNCTION", "CREATE_MODEL", "ALL_PRIVILEGES"],
  table: ["SELECT", "MODIFY", "ALL_PRIVILEGES"], volume: ["READ_VOLUME", "WRITE_VOLUME", "ALL_PRIVILEGES"],
  function: ["EXECUTE", "ALL_PRIVILEGES"], model: ["EXECUTE", "APPLY_TAG", "ALL_PRIVILEGES"] };

function section(title, ...body) {
  return el("section", { class: "card" }, el("h3", {}, title), ...body);
}

function keyValues(rows) {
  return el("dl", { class: "facts" }, rows.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function grid(headers, rows, cls) {
  return el("table", { class: cls || "grid" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

async function showAsset(type, fullName) {
  const detail = $("detail");
  detail.replaceChildren(el("p", { class: "muted" }, "loading…"));
  let asset;
  try {
    asset = await api(GET_PATH[type] + enc(fullName));
  } catch (e) {
    detail.replaceChildren(errorNote(e));
    return;
  }
  const kind = type === "table" && asset.table_type === "VIEW" ? "view" : type;
  detail.replaceChildren(
    el("h1", {}, el("span", { class: `icon ${kind}` }), asset.full_name || asset.name),
    el("p", { class: "muted kind" }, kind + (asset.table_type && kind !== "view" ? ` · ${asset.table_type}` : "")
      + (asset.data_source_format ? ` · ${asset.data_source_format}` : "")),
    asset.comment ? el("p", { class: "comment" }, asset.comment) : null,
    section("Overview", keyValues([
      ["Owner", asset.owner], ["Storage location", asset.storage_location || asset.storage_root],
      ["Created", when(asset.created_at) + (asset.created_by ? ` by ${asset.created_by}` : "")],
      ["Updated", asset.updated_at ? when(asset.updated_at) + (asset.updated_by ? ` by ${asset.updated_by}` : "") : ""],
      ["Volume type", asset.volume_type], ["Returns", asset.data_type || asset.full_data_type],
    ])),
  );
  if (asset.columns) {
    detail.append(section("Columns", grid(["#", "Name", "Type", "Nullable", "Comment"],
      asset.columns.map((c, i) => [String(i + 1), c.name, c.type_text || c.type_name, c.nullable === false ? "no" : "yes", c.comment || ""]),
      "grid columns")));
  }
  const props = asset.properties || {};
  if (Object.keys(props).length) {
    detail.append(section("Properties", grid(["Key", "Value"], Object.entries(props).sort().map(([k, v]) => [k, String(v)]))));
  }
  if (asset.tags && asset.tags.length) {
    detail.append(section("Tags", grid(["Key", "Value"], asset.tags.map((t) => [t.key, t.value || ""]))));
  }
  const grants = section("Grants");
  detail.append(grants);
  showGrants(grants, type, asset);
  if (type === "table" || type === "volume") {
    const lineage = section("Lineage");
    detail.append(lineage);
    showLineage(lineage, type, asset.full_name);
  }
  const audit = section("Audit trail");
  detail.append(audit);
  showAudit(audit, asset.full_name);
}

function mayManage(asset) {
  const me = state.me;
  return me.is_account_admin || me.is_metastore_admin || asset.owner === me.name || (me.groups || []).includes(asset.owner);
}

async function showGrants(card, type, asset) {
  const path = `/permissions/${SECURABLE[type]}/${enc(asset.full_name || asset.name)}`;
  const body = el("div", {}, el("p", { class: "muted" }, "loading…"));
  card.append(body);
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
  if (!mayManage(asset)) return;
  const principal = el("input", { name: "principal", placeholder: "principal", required: true, "aria-label": "principal" });
  const privilege = el("select", { name: "privilege", "aria-label": "privilege" },
    (PRIVILEGES[type] || ["ALL_PRIVILEGES"]).map((p) => el("option", { value: p }, p)));
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
  card.append(el("form", { class: "grant", onsubmit: (e) => { e.preventDefault(); change(true); } },
    principal, privilege, el("button", { type: "submit", class: "grant-button" }, "Grant"),
    el("button", { type: "button", class: "revoke-button", onclick: () => change(false) }, "Revoke"), note));
}

async function showAudit(card, fullName) {
  try {
    const answer = await api(`/shardcat/audit?${query({ securable: fullName, max_results: 20 })}`);
    const events = answer.events || [];
    card.append(events.length
      ? grid(["When", "Principal", "Action", "Status"], events.map((e) => [when(e.at), e.principal || "", e.action, String(e.status)]))
      : el("p", { class: "muted" }, "No events."));
  } catch (e) {
    card.append(el("p", { class: "muted" }, e.status === 403 ? "Only metastore and account admins may read the audit trail." : e.message));
  }
}

// ---- lineage as a picture ------------------------------------------------------------------------

async function showLineage(card, type, fullName) {
  let answer;
  try {
    answer = await api(`/shardcat/lineage?${query({ name: fullName, securable_type: type.toUpperCase(), direction: "both", depth: 3 })}`);
  } catch (e) {
    card.append(errorNote(e));
    return;
  }
  if (!answer.edges.length) {
    card.append(el("p", { class: "muted" }, "No lineage recorded."));
    return;
  }
  card.append(lineagePicture(answer));
  if (answer.truncated) card.append(el("p", { class: "muted" }, "Only the nearest part of the graph is shown."));
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
      group.addEventListener("click", () => showAsset((n.securable_type || "TABLE").toLowerCase(), n.full_name));
    }
  }
  return svg;
}

// ---- search --------------------------------------------------------------------------------------

const TYPE_OF = { TABLE: "table", SCHEMA: "schema", CATALOG: "catalog", VOLUME: "volume", FUNCTION: "function",
  REGISTERED_MODEL: "model" };

async function search(words, token, list) {
  const detail = $("detail");
  if (!list) {
    list = el("ul", { class: "results" });
    detail.replaceChildren(el("h1", {}, `Search: ${words}`), list);
  }
  await pagedList(list, (t) => api(`/shardcat/search?${query({ query: words, max_results: PAGE, page_token: t })}`), "results",
    (r) => el("li", {}, el("span", { class: `icon ${TYPE_OF[r.securable_type] || "table"}` }),
      el("a", { href: "#", class: "result", onclick: (e) => { e.preventDefault(); showAsset(TYPE_OF[r.securable_type] || "table", r.full_name); } }, r.full_name),
      el("span", { class: "muted note" }, r.securable_type.toLowerCase() + (r.comment ? ` · ${r.comment}` : ""))), token);
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
    if (words) search(words);
  });
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
