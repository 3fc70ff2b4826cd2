// bosun web view: the workloads list (#/workloads, with the nodes and
// their cordon) and one workload's page (#/workload/KIND/NS/NAME):
// revisions, the rollout as columns of pods per revision (old beside new),
// conditions and events, all live; scale / restart / undo under RBAC.
'use strict';
(() => {
  const P = window.bosunPages;
  const { el, link, enc, watch, section, table, age } = P;
  const KINDS = {
    deployments: { kind: 'Deployment', api: '/apis/apps/v1', scale: true, restart: true, undo: true },
    statefulsets: { kind: 'StatefulSet', api: '/apis/apps/v1', scale: true, restart: true },
    daemonsets: { kind: 'DaemonSet', api: '/apis/apps/v1', restart: true },
    jobs: { kind: 'Job', api: '/apis/batch/v1' },
  };
  // What kubectl's rollout undo leaves as the Deployment has it.
  const SKIP = new Set(['kubectl.kubernetes.io/last-applied-configuration',
    'deployment.kubernetes.io/revision', 'deployment.kubernetes.io/revision-history',
    'deployment.kubernetes.io/desired-replicas', 'deployment.kubernetes.io/max-replicas',
    'deprecated.deployment.rollback.to']);

  const images = (tpl) => (((tpl || {}).spec || {}).containers || []).map((c) => c.image).join(', ');
  const controller = (o) => (o.metadata.ownerReferences || []).find((r) => r.controller);
  const ownedBy = (kind, name) => (o) => { const c = controller(o); return !!c && c.kind === kind && c.name === name; };
  const rsRevision = (rs) => Number(((rs.metadata.annotations || {})['deployment.kubernetes.io/revision']) || 0);

  // ---- the list -----------------------------------------------------------
  P.routes.workloads = (root, _args, signal) => {
    const h = el('h2', null, 'Workloads');
    root.append(h);
    const status = el('p', 'muted', 'Live through watches, all namespaces.');
    root.append(status);
    for (const [res, k] of Object.entries(KINDS)) {
      const body = section(root, k.kind + 's');
      watch(k.api + '/' + res, signal, (items) => {
        if (items.forbidden) { body.replaceChildren(el('p', 'muted', items.forbidden)); return; }
        const list = [...items.values()].sort((a, b) =>
          (a.metadata.namespace + '/' + a.metadata.name).localeCompare(b.metadata.namespace + '/' + b.metadata.name));
        body.replaceChildren(table(['Namespace', 'Name', 'Ready', 'Images', 'Age'], list.map((o) => {
          const s = o.status || {};
          const ready = res === 'jobs' ? (s.succeeded || 0) + '/' + ((o.spec || {}).completions || 1) + ' succeeded'
            : res === 'daemonsets' ? (s.numberReady || 0) + '/' + (s.desiredNumberScheduled || 0)
              : (s.readyReplicas || 0) + '/' + ((o.spec || {}).replicas === undefined ? 1 : o.spec.replicas);
          return [o.metadata.namespace,
            link(o.metadata.name, '#/workload/' + res + '/' + enc(o.metadata.namespace) + '/' + enc(o.metadata.name)),
            ready, images((o.spec || {}).template), age(o.metadata.creationTimestamp)];
        }), k.kind + 's'));
      });
    }
    const hpas = section(root, 'HorizontalPodAutoscalers');
    watch('/apis/autoscaling/v2/horizontalpodautoscalers', signal, (items) => {
      if (items.forbidden) { hpas.replaceChildren(el('p', 'muted', items.forbidden)); return; }
      hpas.replaceChildren(table(['Namespace', 'Name', 'Target', 'Replicas (current/desired)'], [...items.values()].map((o) => [
        o.metadata.namespace, link(o.metadata.name, '#/hpa/' + enc(o.metadata.namespace) + '/' + enc(o.metadata.name)),
        o.spec.scaleTargetRef.kind + '/' + o.spec.scaleTargetRef.name,
        ((o.status || {}).currentReplicas || 0) + '/' + ((o.status || {}).desiredReplicas || 0)]), 'HorizontalPodAutoscalers'));
    });
    // Nodes, with cordon / uncordon where the user may patch them.
    const nodes = section(root, 'Nodes');
    const bars = new Map();
    watch('/api/v1/nodes', signal, (items) => {
      if (items.forbidden) { nodes.replaceChildren(el('p', 'muted', items.forbidden)); return; }
      nodes.replaceChildren(table(['Name', 'Status', 'Actions'], [...items.values()].map((n) => {
        const ready = ((n.status || {}).conditions || []).find((c) => c.type === 'Ready');
        const cordoned = !!(n.spec && n.spec.unschedulable);
        const name = n.metadata.name;
        const key = name + '/' + cordoned;
        if (!bars.has(key)) {
          const holder = el('div');
          const verb = cordoned ? 'Uncordon' : 'Cordon';
          P.actions(holder, [{
            id: verb.toLowerCase(), label: verb, review: ['patch', '', 'nodes', '', name],
            confirm: () => ({ title: verb + ' ' + name + '?', text: cordoned
              ? 'New pods may be scheduled to ' + name + ' again.'
              : 'No new pods will be scheduled to ' + name + '; its running pods stay.' }),
            run: () => P.patch('/api/v1/nodes/' + enc(name), { spec: { unschedulable: cordoned ? null : true } })
              .then(() => verb + ': ' + name + ' done.'),
          }]);
          bars.set(key, holder);
        }
        return [name, (ready && ready.status === 'True' ? 'Ready' : 'NotReady') + (cordoned ? ', SchedulingDisabled' : ''),
          bars.get(key)];
      }), 'Nodes'));
    });
  };

  // ---- one workload -------------------------------------------------------
  P.routes.workload = (root, [res, ns, name], signal) => {
    const k = KINDS[res];
    if (!k || !ns || !name) { root.append(el('h2', null, 'Not found'), el('p', null, 'No such workload page.')); return; }
    P.header(root, k.kind, ns, name);
    const base = k.api + '/namespaces/' + enc(ns) + '/' + res;
    const self = base + '/' + enc(name);
    let obj = null;
    const acts = [];
    if (k.scale) {
      acts.push({
        id: 'scale', label: 'Scale', review: ['patch', 'apps', res, ns, name, 'scale'],
        confirm: () => ({ title: 'Scale ' + k.kind + ' ' + name, text: 'How many replicas should it run?',
          input: { label: 'Replicas', type: 'number', min: 0, value: String(obj ? obj.spec.replicas : 1) } }),
        run: (v) => P.patch(self + '/scale', { spec: { replicas: Number(v) } })
          .then((s) => 'Scaled to ' + s.spec.replicas + ' replicas.'),
      });
    }
    if (k.restart) {
      acts.push({
        id: 'restart', label: 'Restart', review: ['patch', 'apps', res, ns, name],
        confirm: () => ({ title: 'Restart ' + k.kind + ' ' + name + '?', text: 'Its pods are replaced by a rollout, as by kubectl rollout restart.' }),
        run: () => {
          if (obj && obj.spec.paused) throw new Error('cannot restart a paused deployment (resume it first)');
          const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
          return P.patch(self, { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': at } } } } },
            'application/strategic-merge-patch+json').then(() => 'Restart requested at ' + at + '.');
        },
      });
    }
    if (k.undo) {
      acts.push({
        id: 'undo', label: 'Undo rollout', review: ['patch', 'apps', res, ns, name],
        confirm: () => {
          const prev = previous();
          return { title: 'Undo the rollout of ' + name + '?', text: prev
            ? 'Roll back to revision ' + rsRevision(prev) + ' (' + images(prev.spec.template) + ').'
            : 'There is no previous revision: nothing will change.' };
        },
        run: () => undo(),
      });
    }
    P.actions(root, acts);
    const summary = section(root, 'Summary');
    const revs = section(root, 'Revisions');
    const roll = section(root, 'Pods by revision', 'rollout');
    const conds = section(root, 'Conditions');
    let sets = new Map();
    let pods = new Map();
    let crs = new Map();

    // The ReplicaSet of the second highest revision, as kubectl rollout
    // undo picks it.
    function previous() {
      const list = [...sets.values()].sort((a, b) => rsRevision(b) - rsRevision(a));
      return list.length > 1 ? list[1] : null;
    }

    // Templates equal but for the ReplicaSet's pod-template-hash label.
    function sameTemplate(a, b) {
      const norm = (v) => {
        if (Array.isArray(v)) return v.map(norm);
        if (v && typeof v === 'object') {
          const o = {};
          for (const key of Object.keys(v).sort()) o[key] = norm(v[key]);
          return o;
        }
        return v;
      };
      const strip = (t) => {
        const c = JSON.parse(JSON.stringify(t || {}));
        if (c.metadata && c.metadata.labels) delete c.metadata.labels['pod-template-hash'];
        return JSON.stringify(norm(c));
      };
      return strip(a) === strip(b);
    }

    async function undo() {
      const d = await (await window.bosun.api(self)).json();
      if (d.spec.paused) throw new Error('you cannot rollback a paused deployment; resume it first');
      const prev = previous();
      if (!prev) throw new Error('no rollout history found for deployment "' + name + '"');
      if (sameTemplate(prev.spec.template, d.spec.template)) {
        return 'Skipped: the current template already matches revision ' + rsRevision(prev) + '.';
      }
      const tpl = JSON.parse(JSON.stringify(prev.spec.template));
      if (tpl.metadata && tpl.metadata.labels) delete tpl.metadata.labels['pod-template-hash'];
      const annotations = {};
      for (const [key, v] of Object.entries(d.metadata.annotations || {})) if (SKIP.has(key)) annotations[key] = v;
      for (const [key, v] of Object.entries(prev.metadata.annotations || {})) if (!SKIP.has(key)) annotations[key] = v;
      await P.patch(self, [
        { op: 'replace', path: '/spec/template', value: tpl },
        { op: 'replace', path: '/metadata/annotations', value: annotations },
      ], 'application/json-patch+json');
      return 'Rolled back to revision ' + rsRevision(prev) + '.';
    }

    // Columns: one per revision with pods (or wanted replicas), oldest
    // first, so a rollout shows the old ReplicaSet's pods beside the new.
    function groups() {
      const out = [];
      if (res === 'deployments') {
        for (const rs of sets.values()) {
          const mine = [...pods.values()].filter(ownedBy('ReplicaSet', rs.metadata.name));
          if (!mine.length && !(rs.spec.replicas > 0)) continue;
          out.push({ rev: rsRevision(rs), title: 'Revision ' + rsRevision(rs), sub: 'ReplicaSet ' + rs.metadata.name,
            image: images(rs.spec.template), want: rs.spec.replicas, pods: mine });
        }
      } else if (res === 'jobs') {
        out.push({ rev: 0, title: 'Pods', sub: '', image: images(obj && obj.spec.template), pods: [...pods.values()] });
      } else {
        const byHash = new Map();
        for (const p of pods.values()) {
          const h = (p.metadata.labels || {})['controller-revision-hash'] || '';
          if (!byHash.has(h)) byHash.set(h, []);
          byHash.get(h).push(p);
        }
        for (const [h, mine] of byHash) {
          const cr = [...crs.values()].find((c) => c.metadata.name === h || c.metadata.name.endsWith('-' + h));
          const rev = cr ? cr.revision : 0;
          const tpl = cr && cr.data && cr.data.spec && cr.data.spec.template;
          out.push({ rev, title: cr ? 'Revision ' + rev : 'Revision ?', sub: 'ControllerRevision ' + (cr ? cr.metadata.name : h),
            image: tpl ? images(tpl) : images(mine[0].spec.template || { spec: mine[0].spec }), pods: mine });
        }
      }
      return out.sort((a, b) => a.rev - b.rev);
    }

    function render() {
      if (!obj) {
        summary.replaceChildren(el('p', 'muted', pods.loaded ? k.kind + ' ' + name + ' was not found (or was deleted).' : 'Loading…'));
        return;
      }
      const s = obj.status || {};
      const rows = [['Images', images(obj.spec.template)], ['Created', age(obj.metadata.creationTimestamp) + ' ago']];
      if (res === 'daemonsets') rows.unshift(['Pods (desired / updated / ready)', (s.desiredNumberScheduled || 0) + ' / ' + (s.updatedNumberScheduled || 0) + ' / ' + (s.numberReady || 0)]);
      else if (res === 'jobs') rows.unshift(['Pods (active / succeeded / failed)', (s.active || 0) + ' / ' + (s.succeeded || 0) + ' / ' + (s.failed || 0)]);
      else rows.unshift(['Replicas (desired / updated / ready / available)', obj.spec.replicas + ' / ' + (s.updatedReplicas || 0) + ' / ' + (s.readyReplicas || 0) + ' / ' + (s.availableReplicas || 0)]);
      if (obj.spec.strategy || obj.spec.updateStrategy) rows.push(['Strategy', (obj.spec.strategy || obj.spec.updateStrategy).type]);
      const dl = el('dl', 'facts');
      for (const [t, d] of rows) dl.append(el('dt', null, t), el('dd', null, d));
      summary.replaceChildren(dl);
      // Revisions.
      if (res === 'deployments') {
        const list = [...sets.values()].sort((a, b) => rsRevision(b) - rsRevision(a));
        revs.replaceChildren(table(['Revision', 'ReplicaSet', 'Images', 'Pods (ready / desired)', 'Age'], list.map((rs) => [
          rsRevision(rs), rs.metadata.name, images(rs.spec.template),
          ((rs.status || {}).readyReplicas || 0) + ' / ' + (rs.spec.replicas || 0), age(rs.metadata.creationTimestamp)]), 'Revisions'));
      } else if (res === 'jobs') {
        revs.replaceChildren(el('p', 'muted', 'A Job has no revisions.'));
      } else {
        const list = [...crs.values()].sort((a, b) => b.revision - a.revision);
        revs.replaceChildren(table(['Revision', 'ControllerRevision', 'Images', 'Age'], list.map((c) => [
          c.revision, c.metadata.name, images(c.data && c.data.spec && c.data.spec.template), age(c.metadata.creationTimestamp)]), 'Revisions'));
      }
      // Pods by revision.
      const cols = el('div', 'revcols');
      for (const g of groups()) {
        const col = el('section', 'revcol');
        col.dataset.revision = String(g.rev);
        const hd = el('h4', null, g.title);
        col.append(hd, el('p', 'sub', [g.sub, g.image].filter(Boolean).join(' · ')),
          el('p', 'count', g.pods.length + (g.pods.length === 1 ? ' pod' : ' pods') + (g.want !== undefined ? ' of ' + g.want + ' wanted' : '')));
        const ul = el('ul', 'pods');
        for (const p of g.pods.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) ul.append(P.podCard(p));
        col.append(ul);
        cols.append(col);
      }
      if (!cols.children.length) cols.append(el('p', 'muted', 'No pods.'));
      roll.replaceChildren(cols);
      conds.replaceChildren(P.conditions(s.conditions));
    }

    P.watchOne(base, name, signal, (o) => { obj = o; render(); });
    const nsPath = (r) => '/namespaces/' + enc(ns) + '/' + r;
    if (res === 'deployments') {
      sets = watch('/apis/apps/v1' + nsPath('replicasets'), signal, render, ownedBy('Deployment', name));
      pods = watch('/api/v1' + nsPath('pods'), signal, render, (p) => {
        const c = controller(p);
        return !!c && c.kind === 'ReplicaSet' && c.name.startsWith(name + '-');
      });
    } else {
      if (res !== 'jobs') crs = watch('/apis/apps/v1' + nsPath('controllerrevisions'), signal, render, ownedBy(k.kind, name));
      pods = watch('/api/v1' + nsPath('pods'), signal, render, ownedBy(k.kind, name));
    }
    P.events(root, ns, k.kind, name, signal);
  };
})();
