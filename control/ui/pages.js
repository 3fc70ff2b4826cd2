// bosun web view: the pages after the overview (workloads, a workload, a
// pod, an HPA), reached by the location's hash (#/workloads,
// #/workload/KIND/NS/NAME, #/pod/NS/NAME, #/hpa/NS/NAME). They read the
// cluster through app.js's api and follow (list, then watch); actions are
// offered only where a SelfSubjectAccessReview says the user may, and each
// asks for confirmation in a modal dialog.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const routes = {};  // first hash segment -> render(root, args, signal)
  let current = null; // AbortController of the shown page
  let signedIn = false;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function link(text, hash) {
    const a = el('a', null, text);
    a.href = hash;
    return a;
  }

  const enc = encodeURIComponent;

  // ---- routing ---------------------------------------------------------
  function route() {
    if (current) current.abort();
    current = null;
    if (!signedIn) return;
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
    const render = routes[parts[0]];
    const page = $('page');
    $('nav').hidden = false;
    for (const a of $('nav').querySelectorAll('a')) {
      const here = a.getAttribute('href') === '#' ? !render : location.hash.startsWith(a.getAttribute('href'));
      if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    if (!render) {
      page.hidden = true;
      page.replaceChildren();
      $('overview').hidden = false;
      return;
    }
    $('overview').hidden = true;
    page.hidden = false;
    page.replaceChildren();
    current = new AbortController();
    render(page, parts.slice(1), current.signal);
    const h = page.querySelector('h2');
    if (h) { h.tabIndex = -1; h.focus(); }
  }

  // ---- live collections -----------------------------------------------
  // Follows `path` into a Map uid -> object and calls onChange (once per
  // frame) after any change. `keep` filters what is kept.
  function watch(path, signal, onChange, keep = () => true) {
    const items = new Map();
    let pending = false;
    const changed = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; if (!signal.aborted) onChange(items); });
    };
    window.bosun.follow(path, {
      reset(list) {
        items.clear();
        for (const o of list) if (keep(o)) items.set(o.metadata.uid, o);
        items.loaded = true;
        changed();
      },
      event(type, o) {
        if (type === 'DELETED' || !keep(o)) items.delete(o.metadata.uid);
        else items.set(o.metadata.uid, o);
        changed();
      },
      live() {},
      forbidden(msg) { items.forbidden = msg; items.loaded = true; changed(); },
    }, signal);
    return items;
  }

  // One object by name, followed through a list with a field selector.
  function watchOne(collectionPath, name, signal, onChange) {
    return watch(collectionPath + '?fieldSelector=' + enc('metadata.name=' + name), signal,
      (items) => onChange(items.values().next().value || null, items));
  }

  // ---- RBAC: SelfSubjectAccessReview per action -------------------------
  const reviews = new Map();
  function can(verb, group, resource, namespace, name, subresource) {
    const attrs = { verb, group, resource, namespace: namespace || '', name: name || '', subresource: subresource || '' };
    const key = JSON.stringify(attrs);
    if (!reviews.has(key)) {
      reviews.set(key, window.bosun.api('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: attrs },
        }),
      }).then((r) => r.json()).then((r) => !!(r.status && r.status.allowed), () => false));
    }
    return reviews.get(key);
  }

  // An actions bar: each action's button appears only when its review
  // allows it; data-checked is set once every review has answered.
  // action: {label, review: [verb, group, resource, ns, name, sub],
  //          confirm(): {title, text, input?}, run(value)}
  function actions(root, list) {
    const bar = el('div', 'actions');
    bar.setAttribute('role', 'group');
    bar.setAttribute('aria-label', 'Actions');
    const out = el('p', 'action-result');
    out.setAttribute('role', 'status');
    root.append(bar, out);
    Promise.all(list.map(async (a) => {
      if (!(await can(...a.review))) return;
      const b = el('button', 'action', a.label);
      b.type = 'button';
      b.dataset.action = a.id;
      b.addEventListener('click', async () => {
        const value = await ask(a.confirm());
        if (value === null) return;
        out.textContent = a.label + '…';
        try {
          out.textContent = (await a.run(value)) || a.label + ': done.';
          out.className = 'action-result';
        } catch (e) {
          out.textContent = a.label + ' failed: ' + e.message;
          out.className = 'action-result error';
        }
      });
      return [list.indexOf(a), b];
    })).then((buttons) => {
      for (const x of buttons) if (x) bar.append(x[1]);
      bar.dataset.checked = String(buttons.filter(Boolean).length);
      if (list.length && !bar.children.length) bar.append(el('p', 'muted', 'View only: your access allows no actions here.'));
    });
    return bar;
  }

  // The confirmation dialog: resolves to the input's value (or '' without
  // an input) on Confirm, to null on Cancel or Escape.
  function ask({ title, text, input }) {
    const d = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    const box = $('confirm-input-row');
    const field = $('confirm-input');
    box.hidden = !input;
    // A hidden required field would block every confirmation without an
    // input (cordon, delete, undo...) until a scale had filled it: a
    // disabled field is not validated.
    field.disabled = !input;
    if (input) {
      $('confirm-input-label').textContent = input.label;
      field.type = input.type || 'text';
      field.min = input.min === undefined ? '' : String(input.min);
      field.value = input.value;
    }
    return new Promise((resolve) => {
      const done = (value) => {
        d.removeEventListener('close', onClose);
        $('confirm-form').removeEventListener('submit', onSubmit);
        if (d.open) d.close();
        resolve(value);
      };
      const onClose = () => done(null);
      const onSubmit = (e) => {
        e.preventDefault();
        if (input && !field.checkValidity()) { field.reportValidity(); return; }
        done(input ? field.value : '');
      };
      d.addEventListener('close', onClose);
      $('confirm-form').addEventListener('submit', onSubmit);
      d.showModal();
      (input ? field : $('confirm-ok')).focus();
    });
  }

  function patch(path, body, type = 'application/merge-patch+json') {
    return window.bosun.api(path, {
      method: 'PATCH', headers: { 'Content-Type': type }, body: JSON.stringify(body),
    }).then((r) => r.json());
  }

  // ---- shared sections --------------------------------------------------
  function section(root, title, cls) {
    const s = el('section', 'panel ' + (cls || ''));
    const id = 'p-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
    const h = el('h3', null, title);
    h.id = id;
    s.setAttribute('aria-labelledby', id);
    const body = el('div', 'panel-body');
    s.append(h, body);
    root.append(s);
    return body;
  }

  function table(headers, rows, caption) {
    if (!rows.length) return el('p', 'muted', 'None.');
    const t = el('table');
    if (caption) t.append(el('caption', 'visually-hidden', caption));
    const hr = el('tr');
    for (const h of headers) { const th = el('th', null, h); th.scope = 'col'; hr.append(th); }
    const head = el('thead');
    head.append(hr);
    t.append(head);
    const tb = el('tbody');
    for (const r of rows) {
      const tr = el('tr');
      for (const c of r) { const td = el('td'); td.append(c instanceof Node ? c : String(c === undefined || c === null ? '—' : c)); tr.append(td); }
      tb.append(tr);
    }
    t.append(tb);
    return t;
  }

  function age(ts) {
    if (!ts) return '—';
    const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
    if (s < 120) return s + 's';
    if (s < 7200) return Math.round(s / 60) + 'm';
    if (s < 172800) return Math.round(s / 3600) + 'h';
    return Math.round(s / 86400) + 'd';
  }

  function conditions(list) {
    return table(['Type', 'Status', 'Reason', 'Message', 'Changed'],
      (list || []).map((c) => [c.type, c.status, c.reason, c.message, age(c.lastTransitionTime)]), 'Conditions');
  }

  // The events about one object, live.
  function events(root, ns, kind, name, signal) {
    const body = section(root, 'Events', 'events');
    const path = '/api/v1/namespaces/' + enc(ns) + '/events?fieldSelector=' +
      enc('involvedObject.kind=' + kind + ',involvedObject.name=' + name);
    watch(path, signal, (items) => {
      if (items.forbidden) { body.replaceChildren(el('p', 'muted', 'Events: ' + items.forbidden)); return; }
      const list = [...items.values()].sort((a, b) =>
        (b.lastTimestamp || b.eventTime || '').localeCompare(a.lastTimestamp || a.eventTime || ''));
      body.replaceChildren(table(['Type', 'Reason', 'Age', 'Count', 'Message'],
        list.slice(0, 50).map((e) => [e.type, e.reason, age(e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp),
          e.count || 1, e.message]), 'Events'));
    });
  }

  // A pod as a small card (the overview's colours and words) linking to
  // its page.
  function podCard(p) {
    const v = window.bosun.describe(p);
    const li = el('li', 'pod ' + v.cls);
    li.dataset.key = p.metadata.namespace + '/' + p.metadata.name;
    const a = link(p.metadata.name, '#/pod/' + enc(p.metadata.namespace) + '/' + enc(p.metadata.name));
    const name = el('div', 'name');
    name.append(a);
    const img = ((p.spec || {}).containers || []).map((c) => c.image).join(', ');
    li.append(name, el('div', 'state', v.text), el('div', 'sub', img + ' · ' + (v.node || 'unscheduled')));
    return li;
  }

  function header(root, kind, ns, name) {
    const h = el('h2');
    h.append(el('span', 'kind', kind + ' '), document.createTextNode(ns ? ns + '/' + name : name));
    root.append(h);
  }

  // Where a pod's owner is shown: a ReplicaSet's Deployment, when it has
  // one, else the owner itself.
  async function workloadOf(ns, owner) {
    const kinds = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets', Job: 'jobs' };
    if (owner.kind === 'ReplicaSet') {
      try {
        const rs = await (await window.bosun.api('/apis/apps/v1/namespaces/' + enc(ns) + '/replicasets/' + enc(owner.name))).json();
        const up = (rs.metadata.ownerReferences || []).find((r) => r.controller && r.kind === 'Deployment');
        if (up) return '#/workload/deployments/' + enc(ns) + '/' + enc(up.name);
      } catch (_) { /* no page for it */ }
      return null;
    }
    return kinds[owner.kind] ? '#/workload/' + kinds[owner.kind] + '/' + enc(ns) + '/' + enc(owner.name) : null;
  }

  // The overview's cards lead here: a click (or Enter) on a card opens
  // its pod's page, on its owner the workload's. Delegated, so app.js's
  // cards need not know.
  async function openCard(e) {
    const card = e.target.closest && e.target.closest('#columns li.pod');
    if (!card) return;
    const [ns, name] = card.dataset.key.split('/');
    const dd = e.target.closest('dd');
    const dds = card.querySelectorAll('dd');
    if (dd && dd === dds[dds.length - 1] && dd.textContent.includes('/')) {
      const [kind, owner] = dd.textContent.split('/');
      const hash = await workloadOf(ns, { kind, name: owner });
      if (hash) { location.hash = hash; return; }
    }
    location.hash = '#/pod/' + enc(ns) + '/' + enc(name);
  }

  window.bosunPages = {
    routes, el, link, enc, watch, watchOne, can, actions, ask, patch, section, table, age,
    conditions, events, podCard, header, workloadOf,
    signedIn() { signedIn = true; route(); },
    signedOut() {
      signedIn = false;
      if (current) current.abort();
      current = null;
      reviews.clear();
      $('page').hidden = true;
      $('page').replaceChildren();
      $('nav').hidden = true;
    },
  };

  // Loaded by app.js after sign-in: the document is there.
  window.addEventListener('hashchange', route);
  $('columns').addEventListener('click', openCard);
  $('columns').addEventListener('keydown', (e) => { if (e.key === 'Enter') openCard(e); });
  $('confirm-cancel').addEventListener('click', () => $('confirm').close());
})();
