// bosun web view: reads the cluster through the ordinary Kubernetes API
// with the signed-in user's bearer token (kept in sessionStorage, sent
// only in the Authorization header, so no cookie rides along on
// cross-site requests), live through watches: list, then watch from the
// list's resourceVersion, relisting on 410 Gone. No polling.
'use strict';
(() => {
  const KEY = 'bosun.token';
  const PENDING = '';
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem(KEY);
  let session = null; // AbortController of the running watches
  let namespace = '';
  // What the page did, for tests and the curious: lists and watches
  // opened per path, events applied, errors seen, and how often the
  // status line went from Live to "Reconnecting…".
  const stats = { lists: {}, watches: {}, events: 0, errors: [], shownDown: 0 };
  window.bosunStats = stats;

  // ---- API -------------------------------------------------------------
  class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function api(path, opts = {}) {
    const headers = Object.assign({
      Accept: 'application/json',
      Authorization: 'Bearer ' + token,
    }, opts.headers || {});
    let r;
    for (let attempt = 0; ; attempt++) {
      try {
        r = await fetch(path, Object.assign({}, opts, {
          headers, cache: 'no-store', credentials: 'omit',
        }));
        break;
      } catch (e) {
        // A connection the server closed as the request went out, or one
        // chromium dropped on a change of the host's addresses (a burst
        // of them while pods start or stop on this host, see follow()),
        // fails without an answer (browsers retry no POST): try again for
        // a few seconds, backing off.
        if (attempt >= 7 || (opts.signal && opts.signal.aborted)) throw e;
        stats.errors.push(path + ': ' + e.message + ' (retried)');
        await new Promise((resolve) => setTimeout(resolve, Math.min(200 * 2 ** attempt, 1000)));
      }
    }
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { const s = await r.json(); if (s && s.message) msg = s.message; } catch (_) { /* not a Status */ }
      throw new HttpError(r.status, msg);
    }
    return r;
  }

  const SHOW_DOWN_MS = 3000;
  const sleep = (ms, signal) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

  // Lists `path`, hands the items to h.reset, then follows its watch from
  // the list's resourceVersion, handing each change to h.event. A stream
  // that ends or breaks is resumed from the last resourceVersion seen;
  // only a 410 (that resourceVersion is too old) relists. 401 signs out;
  // 403 tells h.forbidden.
  //
  // Chromium on Linux closes every HTTP/2 connection when this host's IP
  // addresses change (ERR_NETWORK_CHANGED in its net log), and each pod
  // Docker starts on the browser's own host adds an interface: both
  // watches then break together. A broken stream is resumed at once, and
  // the page says "Reconnecting…" only when no watch answered for
  // SHOW_DOWN_MS; another failure within that time waits with back-off.
  async function follow(path, h, signal) {
    let backoff = 500;
    let quick = -Infinity; // when a break was last retried at once
    let down = null; // timer that shows the page as not live
    const up = () => { clearTimeout(down); down = null; h.live(true); };
    signal.addEventListener('abort', () => clearTimeout(down), { once: true });
    let rv = null;
    while (!signal.aborted) {
      try {
        if (rv === null) {
          // Counted once it has answered: a list whose connection broke
          // is tried again, not a relist.
          const list = await (await api(path, { signal })).json();
          if (signal.aborted) return;
          stats.lists[path] = (stats.lists[path] || 0) + 1;
          rv = list.metadata.resourceVersion;
          h.reset(list.items || []);
        }
        stats.watches[path] = (stats.watches[path] || 0) + 1;
        const sep = path.includes('?') ? '&' : '?';
        const r = await api(path + sep + 'watch=true&allowWatchBookmarks=true&resourceVersion=' +
          encodeURIComponent(rv), { signal });
        up();
        const gone = await readEvents(r, signal, (ev) => {
          const meta = ev.object && ev.object.metadata;
          if (meta && meta.resourceVersion) rv = meta.resourceVersion;
          if (signal.aborted) return;
          if (ev.type !== 'BOOKMARK') h.event(ev.type, ev.object);
        });
        if (gone) rv = null;
        backoff = 500;
      } catch (e) {
        if (signal.aborted) return;
        stats.errors.push(path + ': ' + (e.status || '') + ' ' + e.message);
        if (e.status === 401) { signOut('The token is no longer accepted (401).'); return; }
        if (e.status === 403) { h.forbidden(e.message); return; }
        if (e.status === 410) { rv = null; continue; }
        if (!down) down = setTimeout(() => h.live(false), SHOW_DOWN_MS);
        const now = performance.now();
        if (now - quick > SHOW_DOWN_MS) quick = now;
        else {
          await sleep(backoff, signal);
          backoff = Math.min(backoff * 2, 10000);
        }
      }
    }
  }

  // Reads newline-separated watch events; true when the server says the
  // resourceVersion is too old (ERROR 410), false when the stream ends.
  async function readEvents(response, signal, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    signal.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line);
        if (ev.type === 'ERROR') {
          if (ev.object && ev.object.code === 410) return true;
          throw new HttpError(ev.object && ev.object.code, ev.object && ev.object.message);
        }
        onEvent(ev);
      }
    }
  }

  // ---- what a card shows ----------------------------------------------
  const BAD = new Set(['CrashLoopBackOff', 'ErrImagePull', 'ImagePullBackOff', 'InvalidImageName',
    'CreateContainerConfigError', 'CreateContainerError', 'RunContainerError', 'Error',
    'OOMKilled', 'ContainerStatusUnknown', 'Evicted']);

  function describe(p) {
    const st = p.status || {};
    const statuses = st.containerStatuses || [];
    const total = (p.spec && p.spec.containers || []).length;
    const ready = statuses.filter((c) => c.ready).length;
    const restarts = statuses.reduce((n, c) => n + (c.restartCount || 0), 0);
    let reason = st.reason || '';
    for (const c of statuses) {
      const s = c.state || {};
      if (s.waiting && s.waiting.reason) { reason = s.waiting.reason; break; }
      if (s.terminated && s.terminated.reason && st.phase !== 'Succeeded') reason = s.terminated.reason;
    }
    const phase = st.phase || 'Pending';
    const podReady = (st.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True');
    let cls; let text;
    if (p.metadata.deletionTimestamp) { cls = 'gone'; text = 'Terminating'; }
    else if (phase === 'Succeeded') { cls = 'done'; text = 'Completed'; }
    else if (phase === 'Failed' || BAD.has(reason)) { cls = 'bad'; text = reason || phase; }
    else if (phase === 'Running' && podReady) { cls = 'ok'; text = 'Running'; }
    else { cls = 'wait'; text = reason || phase; }
    if (cls !== 'done') text += ' · ' + (podReady ? 'Ready' : 'Not ready') + ' ' + ready + '/' + total;
    const refs = p.metadata.ownerReferences || [];
    const owner = refs.find((r) => r.controller) || refs[0];
    return {
      cls, text,
      restarts: String(restarts),
      ip: st.podIP || '—',
      owner: owner ? owner.kind + '/' + owner.name : 'none',
      node: (p.spec && p.spec.nodeName) || PENDING,
    };
  }

  // ---- the board -------------------------------------------------------
  const cards = new Map();   // uid -> {el, view, key}
  const columns = new Map(); // node name ('' = pending) -> {el, list, count, state}
  const nodes = new Map();   // name -> Node
  const queue = new Map();   // uid -> Pod, or null to remove
  let flushing = false;
  let firstRender = false;
  let nodesLoaded = false; let podsLoaded = false;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function column(name) {
    let c = columns.get(name);
    if (c) return c;
    const sec = el('section', name === PENDING ? 'column pending' : 'column');
    sec.dataset.node = name;
    const h = el('h3');
    const title = el('span', 'title', name === PENDING ? 'Pending (unscheduled)' : name);
    const count = el('span', 'count', '0 pods');
    h.append(title, count);
    const id = 'col-' + columns.size;
    h.id = id;
    sec.setAttribute('aria-labelledby', id);
    const state = el('p', 'node-state');
    const list = el('ul', 'pods');
    const empty = el('p', 'empty', 'No pods');
    sec.append(h, state, list, empty);
    c = { el: sec, list, count, state, empty };
    columns.set(name, c);
    // Pending first, then the nodes by name.
    const board = $('columns');
    let before = null;
    if (name === PENDING) before = board.firstChild;
    else {
      for (const other of board.children) {
        if (other.dataset.node !== PENDING && other.dataset.node > name) { before = other; break; }
      }
    }
    board.insertBefore(sec, before);
    showNode(name);
    return c;
  }

  function showNode(name) {
    const c = columns.get(name);
    if (!c || name === PENDING) return;
    const n = nodes.get(name);
    if (!n) { c.state.textContent = nodesLoaded ? 'Node: not listed' : ''; return; }
    const ready = ((n.status || {}).conditions || []).find((x) => x.type === 'Ready');
    let s = ready && ready.status === 'True' ? 'Node Ready' : 'Node NotReady';
    if (n.spec && n.spec.unschedulable) s += ', cordoned';
    c.state.textContent = s;
  }

  function makeCard() {
    const li = el('li', 'pod');
    li.tabIndex = 0;
    const name = el('div', 'name');
    const ns = el('span', 'ns');
    const nm = document.createTextNode('');
    name.append(ns, nm);
    const state = el('div', 'state');
    const dl = el('dl');
    const field = (label) => { const dd = el('dd'); dl.append(el('dt', null, label), dd); return dd; };
    const restarts = field('Restarts'); const ip = field('IP'); const owner = field('Owner');
    li.append(name, state, dl);
    return { el: li, ns, nm, state, restarts, ip, owner, view: null, key: '' };
  }

  function insertSorted(list, li, key) {
    const kids = list.children;
    let lo = 0; let hi = kids.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (kids[mid].dataset.key < key) lo = mid + 1; else hi = mid;
    }
    list.insertBefore(li, kids[lo] || null);
  }

  function apply(uid, pod, touched) {
    let card = cards.get(uid);
    if (!pod) {
      if (card) { touched.add(card.view.node); card.el.remove(); cards.delete(uid); }
      return;
    }
    const v = describe(pod);
    const key = pod.metadata.namespace + '/' + pod.metadata.name;
    if (!card) {
      card = makeCard();
      card.el.dataset.key = key;
      card.el.dataset.uid = uid;
      card.ns.textContent = pod.metadata.namespace + '/';
      card.nm.data = pod.metadata.name;
      card.key = key;
      cards.set(uid, card);
    }
    const old = card.view;
    if (!old || old.cls !== v.cls) card.el.className = 'pod ' + v.cls;
    if (!old || old.text !== v.text) card.state.textContent = v.text;
    if (!old || old.restarts !== v.restarts) card.restarts.textContent = v.restarts;
    if (!old || old.ip !== v.ip) card.ip.textContent = v.ip;
    if (!old || old.owner !== v.owner) card.owner.textContent = v.owner;
    if (!old || old.text !== v.text || old.restarts !== v.restarts || old.ip !== v.ip ||
      old.owner !== v.owner) {
      card.el.setAttribute('aria-label', key + ': ' + v.text + ', restarts ' + v.restarts +
        ', IP ' + v.ip + ', owner ' + v.owner);
    }
    if (!old || old.node !== v.node) {
      if (old) touched.add(old.node);
      touched.add(v.node);
      insertSorted(column(v.node).list, card.el, key);
    }
    card.view = v;
  }

  function schedule() {
    if (flushing) return;
    flushing = true;
    requestAnimationFrame(flush);
  }

  function setText(e, text) { if (e.textContent !== text) e.textContent = text; }

  // At most this long of card work per frame: a list of 1000 pods is
  // drawn over a few frames instead of freezing the tab for a second.
  const FRAME_BUDGET_MS = 12;

  function flush() {
    flushing = false;
    const touched = new Set();
    const until = performance.now() + FRAME_BUDGET_MS;
    for (const [uid, pod] of queue) {
      apply(uid, pod, touched);
      queue.delete(uid);
      if (performance.now() > until) break;
    }
    if (queue.size) schedule();
    for (const name of touched) {
      const c = columns.get(name);
      if (!c) continue;
      const n = c.list.children.length;
      c.count.textContent = n + (n === 1 ? ' pod' : ' pods');
      c.empty.hidden = n > 0;
    }
    const connection = live ? 'Live' : 'Reconnecting…';
    setText($('status'), connection + ' · ' + cards.size + ' pods' +
      (namespace ? ' in ' + namespace : ' in all namespaces'));
    // Announced (a polite live region) only when the connection's state
    // changes, not at every pod count.
    setText($('conn'), connection);
    if (!firstRender && podsLoaded && nodesLoaded && !queue.size) {
      firstRender = true;
      $('columns').dataset.firstRenderMs = String(Math.round(performance.now()));
    }
  }

  let live = false;
  const podHandlers = {
    reset(items) {
      const seen = new Set();
      for (const p of items) { seen.add(p.metadata.uid); queue.set(p.metadata.uid, p); }
      for (const uid of cards.keys()) if (!seen.has(uid)) queue.set(uid, null);
      podsLoaded = true;
      schedule();
    },
    event(type, p) {
      stats.events += 1;
      queue.set(p.metadata.uid, type === 'DELETED' ? null : p);
      schedule();
    },
    live(on) {
      if (live && !on) stats.shownDown += 1;
      live = on; schedule();
    },
    forbidden(msg) {
      podsLoaded = true;
      $('status').textContent = 'Pods: ' + msg;
      $('conn').textContent = 'Pods: ' + msg;
    },
  };
  const nodeHandlers = {
    reset(items) {
      nodes.clear();
      for (const n of items) { nodes.set(n.metadata.name, n); column(n.metadata.name); }
      nodesLoaded = true;
      for (const name of columns.keys()) showNode(name);
      schedule();
    },
    event(type, n) {
      if (type === 'DELETED') nodes.delete(n.metadata.name); else nodes.set(n.metadata.name, n);
      column(n.metadata.name);
      showNode(n.metadata.name);
    },
    live() {},
    // A view-only user may not list nodes: the columns come from the
    // pods' nodeName instead.
    forbidden() {
      nodesLoaded = true;
      for (const name of columns.keys()) showNode(name);
      schedule();
    },
  };

  function startPods(signal) {
    const path = namespace
      ? '/api/v1/namespaces/' + encodeURIComponent(namespace) + '/pods'
      : '/api/v1/pods';
    follow(path, podHandlers, signal);
  }

  function clearBoard() {
    cards.clear(); columns.clear(); queue.clear(); nodes.clear();
    $('columns').replaceChildren();
    firstRender = false; podsLoaded = false; nodesLoaded = false;
  }

  let podWatch = null;
  function restartPods() {
    if (podWatch) podWatch.abort();
    podWatch = new AbortController();
    session.signal.addEventListener('abort', () => podWatch.abort(), { once: true });
    for (const uid of cards.keys()) queue.set(uid, null);
    podsLoaded = false;
    schedule();
    startPods(podWatch.signal);
  }

  async function loadNamespaces(signal) {
    try {
      const list = await (await api('/api/v1/namespaces', { signal })).json();
      const dl = $('ns-list');
      dl.replaceChildren(...list.items.map((n) => {
        const o = el('option'); o.value = n.metadata.name; return o;
      }));
    } catch (_) { /* a user who may not list namespaces types one */ }
  }

  // ---- sign-in ---------------------------------------------------------
  async function whoami() {
    const r = await api('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    });
    const review = await r.json();
    return ((review.status || {}).userInfo || {}).username || 'unknown user';
  }

  async function signIn(candidate) {
    token = candidate;
    let user;
    try { user = await whoami(); } catch (e) {
      token = null;
      throw e;
    }
    sessionStorage.setItem(KEY, candidate);
    sessionStorage.setItem(KEY + '.user', user);
    showOverview(user);
  }

  // The other pages (pages.js and the files after it) read the cluster
  // through these; they are told when the user signs in and out.
  // Their files are fetched once the user has signed in, so the sign-in
  // page's first load stays index.html, app.js and app.css.
  window.bosun = { api, follow, describe, el };
  let pagesLoading = false;
  const pages = (what) => {
    if (window.bosunPages) { window.bosunPages[what](); return; }
    if (what !== 'signedIn' || pagesLoading) return;
    pagesLoading = true;
    const css = document.createElement('link');
    css.rel = 'stylesheet'; css.href = '/ui/pages.css';
    document.head.append(css);
    const files = ['pages', 'workload', 'pod', 'hpa'];
    for (const f of files) {
      const s = document.createElement('script');
      s.src = '/ui/' + f + '.js'; s.async = false; // in this order
      if (f === files[files.length - 1]) s.onload = () => { if (session) pages('signedIn'); };
      document.head.append(s);
    }
  };

  function showOverview(user) {
    $('signin').hidden = true;
    $('overview').hidden = false;
    $('who').hidden = false;
    $('who').textContent = 'Signed in as ' + user;
    $('signout').hidden = false;
    clearBoard();
    column(PENDING);
    session = new AbortController();
    follow('/api/v1/nodes', nodeHandlers, session.signal);
    restartPods();
    loadNamespaces(session.signal);
    pages('signedIn');
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(KEY + '.user');
    token = null;
    if (session) session.abort();
    session = null;
    clearBoard();
    $('overview').hidden = true;
    $('who').hidden = true;
    $('signout').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = message || '';
    $('token').value = '';
    pages('signedOut');
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('signin-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      $('signin-error').textContent = '';
      try { await signIn($('token').value.trim()); } catch (err) {
        $('signin-error').textContent = err.status === 401
          ? 'The token was not accepted (401 Unauthorized).'
          : 'Signing in failed: ' + err.message;
      }
    });
    $('signout').addEventListener('click', () => signOut(''));
    let typing = null;
    const changeNs = () => {
      clearTimeout(typing);
      const ns = $('ns').value.trim();
      if (ns === namespace || !session) return;
      namespace = ns;
      restartPods();
    };
    $('ns').addEventListener('change', changeNs);
    $('ns').addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(changeNs, 500); });
    if (token) {
      // Only a 401 undoes the sign-in: after a network failure the
      // watches retry on their own.
      whoami().then(showOverview, (err) => {
        if (err.status === 401) signOut('Please sign in again.');
        else showOverview(sessionStorage.getItem(KEY + '.user') || 'unknown user');
      });
    }
  });
})();
