// bosun web view: one pod's page (#/pod/NS/NAME): its containers (image,
// state, ready, started, restarts, last termination, probes), the log of
// one container followed live (a streamed fetch of ?follow=true), and its
// events; delete under RBAC.
'use strict';
(() => {
  const P = window.bosunPages;
  const { el, link, enc, section, table, age } = P;
  const MAX_LOG = 256 * 1024; // characters kept on the page

  function state(s) {
    s = s || {};
    if (s.running) return 'Running since ' + age(s.running.startedAt) + ' ago';
    if (s.waiting) return 'Waiting: ' + (s.waiting.reason || '') + (s.waiting.message ? ' (' + s.waiting.message + ')' : '');
    if (s.terminated) return 'Terminated: ' + (s.terminated.reason || '') + ', exit code ' + s.terminated.exitCode;
    return 'Not started';
  }

  function last(s) {
    const t = s && s.terminated;
    return t ? (t.reason || 'Terminated') + ', exit code ' + t.exitCode + ', ' + age(t.finishedAt) + ' ago' : '—';
  }

  function probes(c) {
    const out = [];
    for (const [k, label] of [['startupProbe', 'startup'], ['livenessProbe', 'liveness'], ['readinessProbe', 'readiness']]) {
      const p = c[k];
      if (!p) continue;
      const how = p.httpGet ? 'GET :' + p.httpGet.port + (p.httpGet.path || '/')
        : p.tcpSocket ? 'TCP :' + p.tcpSocket.port : p.exec ? 'exec' : p.grpc ? 'gRPC :' + p.grpc.port : '?';
      out.push(label + ' ' + how + ' every ' + (p.periodSeconds || 10) + 's');
    }
    return out.join('; ') || 'none';
  }

  const yes = (b) => (b ? 'yes' : 'no');

  P.routes.pod = (root, [ns, name], signal) => {
    if (!ns || !name) { root.append(el('h2', null, 'Not found')); return; }
    P.header(root, 'Pod', ns, name);
    const self = '/api/v1/namespaces/' + enc(ns) + '/pods/' + enc(name);
    P.actions(root, [{
      id: 'delete', label: 'Delete pod', review: ['delete', '', 'pods', ns, name],
      confirm: () => ({ title: 'Delete pod ' + name + '?', text: 'Its containers are stopped; a controller that owns it makes a new one.' }),
      run: () => window.bosun.api(self, { method: 'DELETE' }).then(() => 'Pod ' + name + ' is being deleted.'),
    }]);
    const summary = section(root, 'Summary');
    const containers = section(root, 'Containers');
    const conds = section(root, 'Conditions');
    const logs = section(root, 'Logs', 'logs');
    let pod = null;
    let ownerHash;

    // Logs: a container picker, the text, and the stream's state.
    const bar = el('div', 'controls');
    const pickId = 'log-container';
    const lab = el('label', null, 'Container');
    lab.htmlFor = pickId;
    const pick = el('select');
    pick.id = pickId;
    const logState = el('p', 'status');
    logState.setAttribute('role', 'status');
    const again = el('button', null, 'Follow again');
    again.type = 'button';
    again.hidden = true;
    bar.append(lab, pick, again, logState);
    const pre = el('pre', 'log');
    pre.setAttribute('role', 'log');
    pre.setAttribute('aria-label', 'Container log');
    pre.tabIndex = 0;
    logs.append(bar, pre);
    let stream = null; // AbortController of the log being followed
    let streamed = '';  // container whose log was opened

    let resumes = 0;    // streams resumed after breaking, since the last data
    async function follow(container, resuming) {
      if (!resuming) resumes = 0;
      if (stream) stream.abort();
      stream = new AbortController();
      signal.addEventListener('abort', () => stream.abort(), { once: true });
      const mine = stream.signal;
      streamed = container;
      pre.textContent = '';
      again.hidden = true;
      logState.textContent = 'Following ' + container + '…';
      let resumed = false;
      try {
        const r = await window.bosun.api(self + '/log?follow=true&tailLines=1000&container=' + enc(container),
          { signal: mine, headers: { Accept: '*/*' } });
        pre.dataset.following = container;
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        mine.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true });
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          resumes = 0;
          const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          let text = pre.textContent + dec.decode(value, { stream: true });
          if (text.length > MAX_LOG) text = text.slice(text.length - MAX_LOG);
          pre.textContent = text;
          if (atEnd) pre.scrollTop = pre.scrollHeight;
        }
        if (!mine.aborted) logState.textContent = 'The log stream of ' + container + ' ended.';
      } catch (e) {
        if (mine.aborted) return;
        // A stream broken under way (chromium drops every connection when
        // this host's addresses change, as a pod starting here makes them;
        // see app.js's follow()): follow again, which reads the last 1000
        // lines afresh, so nothing is lost or shown twice.
        if (e instanceof TypeError && resumes < 10) {
          resumes++;
          resumed = true;
          setTimeout(() => { if (!mine.aborted) follow(container, true); }, 300);
          return;
        }
        logState.textContent = 'Log of ' + container + ': ' + e.message;
      } finally {
        delete pre.dataset.following;
        if (!mine.aborted && !resumed) again.hidden = false;
      }
    }
    again.addEventListener('click', () => follow(pick.value));
    pick.addEventListener('change', () => follow(pick.value));

    // A container's log can be read once it has started.
    function startLogs() {
      const names = pod.spec.containers.map((c) => c.name);
      if (pick.options.length !== names.length) {
        pick.replaceChildren(...names.map((n) => { const o = el('option', null, n); o.value = n; return o; }));
      }
      if (streamed) return;
      const st = ((pod.status || {}).containerStatuses || []).find((c) => c.name === pick.value) || {};
      if ((st.state || {}).running || (st.state || {}).terminated) follow(pick.value);
      else logState.textContent = 'Waiting for ' + pick.value + ' to start…';
    }

    async function render(p) {
      pod = p;
      if (!p) {
        summary.replaceChildren(el('p', 'muted', 'Pod ' + name + ' was not found (or was deleted).'));
        return;
      }
      const v = window.bosun.describe(p);
      const st = p.status || {};
      const owner = (p.metadata.ownerReferences || []).find((r) => r.controller);
      if (owner && ownerHash === undefined) {
        ownerHash = null;
        ownerHash = await P.workloadOf(ns, owner);
      }
      const dl = el('dl', 'facts');
      const row = (t, d) => { const dd = el('dd'); dd.append(d instanceof Node ? d : String(d)); dl.append(el('dt', null, t), dd); };
      const badge = el('span', 'badge ' + v.cls, v.text);
      row('State', badge);
      row('Node', (p.spec && p.spec.nodeName) || 'not scheduled');
      row('Pod IP', st.podIP || '—');
      row('Owner', owner ? (ownerHash ? link(owner.kind + '/' + owner.name, ownerHash) : owner.kind + '/' + owner.name) : 'none');
      row('QoS class', st.qosClass || '—');
      row('Started', st.startTime ? age(st.startTime) + ' ago' : '—');
      summary.replaceChildren(dl);
      const statuses = new Map((st.containerStatuses || []).map((c) => [c.name, c]));
      containers.replaceChildren(table(['Name', 'Image', 'State', 'Ready', 'Started', 'Restarts', 'Last termination', 'Probes'],
        p.spec.containers.map((c) => {
          const s = statuses.get(c.name) || {};
          return [c.name, c.image, state(s.state), yes(s.ready), s.started === undefined ? '—' : yes(s.started),
            s.restartCount || 0, last(s.lastState), probes(c)];
        }), 'Containers'));
      conds.replaceChildren(P.conditions(st.conditions));
      startLogs();
    }

    P.watchOne('/api/v1/namespaces/' + enc(ns) + '/pods', name, signal, render);
    P.events(root, ns, 'Pod', name, signal);
  };
})();
