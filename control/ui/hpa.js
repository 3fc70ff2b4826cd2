// bosun web view: an HPA's page (#/hpa/NS/NAME): charts, in inline SVG,
// of its current and desired replicas and of its first metric against the
// target over the last minutes, fed by a watch on the HPA (each status it
// writes is a sample), with the samples also as a table.
'use strict';
(() => {
  const P = window.bosunPages;
  const { el, link, enc, section, table, age } = P;
  const WINDOW_MS = 5 * 60 * 1000;
  const SVG = 'http://www.w3.org/2000/svg';

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The first metric's current value and target, as numbers with a unit.
  function metric(h) {
    const spec = ((h.spec || {}).metrics || [])[0];
    if (!spec) return null;
    const cur = (((h.status || {}).currentMetrics || [])[0]) || {};
    const src = spec[spec.type.charAt(0).toLowerCase() + spec.type.slice(1)] || {};
    const now = cur[spec.type.charAt(0).toLowerCase() + spec.type.slice(1)] || {};
    const t = src.target || {};
    const name = (src.name || (src.metric && src.metric.name) || spec.type);
    const num = (q) => {
      if (q === undefined || q === null) return null;
      const m = String(q).match(/^([0-9.]+)(m|k|Ki|M|Mi|G|Gi)?$/);
      if (!m) return null;
      const f = { m: 0.001, k: 1e3, Ki: 1024, M: 1e6, Mi: 1048576, G: 1e9, Gi: 1073741824 }[m[2]] || 1;
      return Number(m[1]) * f;
    };
    if (t.type === 'Utilization') {
      return { label: name + ' utilization', unit: '%', target: t.averageUtilization,
        value: now.current ? (now.current.averageUtilization === undefined ? null : now.current.averageUtilization) : null };
    }
    const key = t.type === 'AverageValue' ? 'averageValue' : 'value';
    return { label: name + ' ' + (t.type === 'AverageValue' ? 'average' : 'value'), unit: '', target: num(t[key]),
      value: now.current ? num(now.current[key]) : null };
  }

  // A step chart of `series` ({label, cls, points: [[t, v]], dashed}) over
  // the last WINDOW_MS, with y from 0 to yMax.
  function chart(title, series, yMax, unit) {
    const W = 640; const H = 180; const L = 44; const R = 10; const T = 12; const B = 26;
    const now = Date.now();
    const x = (t) => L + (W - L - R) * Math.max(0, (t - (now - WINDOW_MS)) / WINDOW_MS);
    const y = (v) => T + (H - T - B) * (1 - Math.min(v, yMax) / yMax);
    const id = 'c' + Math.random().toString(36).slice(2);
    const s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-labelledby': id, class: 'chart' });
    s.append(svg('title', { id }, title + ': ' + series.map((x2) => {
      const p = x2.points[x2.points.length - 1];
      return x2.label + ' ' + (p ? p[1] + unit : 'unknown');
    }).join(', ')));
    for (const f of [0, 0.5, 1]) {
      const v = Math.round(yMax * f * 10) / 10;
      s.append(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
      s.append(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, v + unit));
    }
    for (const [t, label] of [[now - WINDOW_MS, '-5 min'], [now - WINDOW_MS / 2, '-2.5 min'], [now, 'now']]) {
      s.append(svg('text', { x: x(t), y: H - 6, 'text-anchor': t === now ? 'end' : 'middle' }, label));
    }
    for (const ser of series) {
      if (!ser.points.length) continue;
      let d = '';
      let prev = null;
      for (const [t, v] of ser.points) {
        if (v === null || v === undefined) {
          if (prev !== null) d += 'H' + x(t).toFixed(1) + ' ';
          prev = null;
          continue;
        }
        d += prev === null ? 'M' + x(t).toFixed(1) + ' ' + y(v).toFixed(1) + ' '
          : 'H' + x(t).toFixed(1) + 'V' + y(v).toFixed(1) + ' ';
        prev = v;
      }
      if (prev !== null) d += 'H' + x(now).toFixed(1);
      if (d) s.append(svg('path', { d, class: 'series ' + ser.cls + (ser.dashed ? ' dashed' : '') }));
    }
    return s;
  }

  function legend(series) {
    const ul = el('ul', 'chart-legend');
    for (const s of series) {
      const li = el('li');
      li.append(el('span', 'swatch ' + s.cls + (s.dashed ? ' dashed' : '')), document.createTextNode(s.label));
      ul.append(li);
    }
    return ul;
  }

  P.routes.hpa = (root, [ns, name], signal) => {
    if (!ns || !name) { root.append(el('h2', null, 'Not found')); return; }
    P.header(root, 'HorizontalPodAutoscaler', ns, name);
    const summary = section(root, 'Summary');
    const charts = section(root, 'Replicas and metric, last 5 minutes', 'charts');
    const conds = section(root, 'Conditions');
    const samples = []; // {t, current, desired, value, target}
    let hpa = null;
    const det = el('details'); // kept, so a redraw leaves it open

    function draw() {
      if (!hpa) {
        summary.replaceChildren(el('p', 'muted', 'HorizontalPodAutoscaler ' + name + ' was not found (or was deleted).'));
        return;
      }
      const st = hpa.status || {};
      const ref = hpa.spec.scaleTargetRef;
      const m = metric(hpa);
      const kinds = { Deployment: 'deployments', StatefulSet: 'statefulsets' };
      const dl = el('dl', 'facts');
      const row = (t, d) => { const dd = el('dd'); dd.append(d instanceof Node ? d : String(d)); dl.append(el('dt', null, t), dd); };
      row('Target', kinds[ref.kind] ? link(ref.kind + '/' + ref.name, '#/workload/' + kinds[ref.kind] + '/' + enc(ns) + '/' + enc(ref.name)) : ref.kind + '/' + ref.name);
      row('Replicas (min / max)', (hpa.spec.minReplicas || 1) + ' / ' + hpa.spec.maxReplicas);
      row('Replicas (current / desired)', (st.currentReplicas || 0) + ' / ' + (st.desiredReplicas || 0));
      if (m) row(m.label + ' (current / target)', (m.value === null ? 'unknown' : m.value + m.unit) + ' / ' + m.target + m.unit);
      row('Last scaled', st.lastScaleTime ? age(st.lastScaleTime) + ' ago' : 'never');
      summary.replaceChildren(dl);
      const since = Date.now() - WINDOW_MS;
      const shown = samples.filter((s, i) => s.t >= since || (samples[i + 1] && samples[i + 1].t >= since));
      const reps = [
        { label: 'Current replicas', cls: 's1', points: shown.map((s) => [Math.max(s.t, since), s.current]) },
        { label: 'Desired replicas', cls: 's2', dashed: true, points: shown.map((s) => [Math.max(s.t, since), s.desired]) },
      ];
      const parts = [el('h4', null, 'Replicas'), legend(reps), chart('Replicas', reps, Math.max(1, hpa.spec.maxReplicas), '')];
      if (m) {
        const ms = [
          { label: m.label, cls: 's1', points: shown.map((s) => [Math.max(s.t, since), s.value]) },
          { label: 'Target', cls: 's3', dashed: true, points: shown.map((s) => [Math.max(s.t, since), s.target]) },
        ];
        const top = Math.max(1, ...shown.map((s) => Math.max(s.value || 0, s.target || 0))) * 1.2;
        parts.push(el('h4', null, m.label + ' against its target'), legend(ms), chart(m.label, ms, Math.ceil(top), m.unit));
      }
      det.replaceChildren(el('summary', null, 'Samples as a table (' + samples.length + ')'),
        table(['Time', 'Current', 'Desired', m ? m.label : 'Metric', 'Target'], samples.slice(-30).reverse().map((s) => [
          new Date(s.t).toLocaleTimeString(), s.current, s.desired, s.value === null ? 'unknown' : s.value, s.target]), 'Samples'));
      parts.push(det, el('p', 'muted', 'Sampled from the HPA\'s status as the watch delivers it, since this page opened.'));
      charts.replaceChildren(...parts);
      charts.dataset.samples = String(samples.length);
      conds.replaceChildren(P.conditions(st.conditions));
    }

    P.watchOne('/apis/autoscaling/v2/namespaces/' + enc(ns) + '/horizontalpodautoscalers', name, signal, (h) => {
      hpa = h;
      if (h) {
        const st = h.status || {};
        const m = metric(h);
        const s = { t: Date.now(), current: st.currentReplicas || 0, desired: st.desiredReplicas || 0,
          value: m ? m.value : null, target: m ? m.target : null };
        const prev = samples[samples.length - 1];
        if (!prev || ['current', 'desired', 'value', 'target'].some((k) => prev[k] !== s[k])) samples.push(s);
        while (samples.length > 2 && samples[1].t < Date.now() - 2 * WINDOW_MS) samples.shift();
      }
      draw();
    });
    // The time axis moves on its own (a redraw, no request).
    const tick = setInterval(() => { if (hpa) draw(); }, 5000);
    signal.addEventListener('abort', () => clearInterval(tick), { once: true });
  };
})();
