// Benchmark helper (not a test, not part of the build): the web view's
// first load side by side with another app.js/app.css, in one chromium
// against one running control plane. It loads /ui/ signed in, alternating
// the page as the control plane serves it ("old") with the given files
// substituted through DevTools' Fetch interception ("new"), and prints per
// load: when the board was complete (data-first-render-ms), the Long Tasks
// API's tasks, requestAnimationFrame gaps over 100 ms, and the pod list's
// transfer size. Node 20+ (its WebSocket), no packages:
//
//   chromium --headless --no-sandbox --ignore-certificate-errors \
//     --remote-debugging-port=0 --user-data-dir=DIR about:blank &
//   node --experimental-websocket scripts/bench-webview-ab.js \
//     DIR/DevToolsActivePort https://ADDRESS/ui/ "$(cat DATA_DIR/admin-token)" \
//     control/ui/app.js ROUNDS control/ui/app.css
//
// docs/benchmarks.md ("The web view") has the figures and the setup.
'use strict';
const fs = require('fs');
const [,, portFile, url, token, altFile, roundsArg] = process.argv;
const rounds = Number(roundsArg || 3);
const alt = fs.readFileSync(altFile).toString('base64');
const altCss = process.argv[7] ? fs.readFileSync(process.argv[7]).toString('base64') : null;
const sleep = (ms) => new Promise(r => setTimeout(r, ms));
(async () => {
  let s; for (;;) { try { s = fs.readFileSync(portFile, 'utf8'); if (s.split('\n').length >= 2) break; } catch (e) {} await sleep(100); }
  const [port] = s.split('\n');
  const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const ws = new WebSocket(list.find(t => t.type === 'page').webSocketDebuggerUrl);
  await new Promise(r => ws.onopen = r);
  let id = 0; const pending = new Map();
  const send = (method, params = {}) => new Promise(r => { const i = ++id; pending.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.id && pending.has(d.id)) { pending.get(d.id)(d); pending.delete(d.id); return; }
    if (d.method === 'Fetch.requestPaused') {
      const css = d.params.request.url.includes('app.css');
      send('Fetch.fulfillRequest', { requestId: d.params.requestId, responseCode: 200,
        responseHeaders: [{ name: 'Content-Type', value: css ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8' }, { name: 'Cache-Control', value: 'no-store' }], body: css ? altCss : alt });
    }
  };
  const ev = async (expr) => { const r = await send('Runtime.evaluate', { expression: expr, awaitPromise: true, returnByValue: true }); return r.result && r.result.result && r.result.result.value; };
  await send('Page.enable');
  await send('Network.enable');
  await send('Network.setCacheDisabled', { cacheDisabled: true });
  await send('Page.addScriptToEvaluateOnNewDocument', { source: "window.__long=[]; new PerformanceObserver(l => { for (const e of l.getEntries()) window.__long.push(Math.round(e.duration)); }).observe({type:'longtask', buffered:true}); window.__gaps=[]; let __last=0; const __t=(t)=>{ if(__last && t-__last>100) window.__gaps.push(Math.round(t-__last)); __last=t; requestAnimationFrame(__t); }; requestAnimationFrame(__t);" });
  await send('Page.navigate', { url });
  await sleep(3000);
  await ev(`sessionStorage.setItem('bosun.token', ${JSON.stringify(token)}); true`);
  for (let round = 0; round < rounds; round++) {
    for (const which of ['old', 'new']) {
      if (which === 'new') await send('Fetch.enable', { patterns: [{ urlPattern: '*/ui/app.js*', requestStage: 'Request' }].concat(altCss ? [{ urlPattern: '*/ui/app.css*', requestStage: 'Request' }] : []) });
      else await send('Fetch.disable');
      await send('Page.navigate', { url });
      const t0 = Date.now();
      let fr;
      while (!(fr = await ev("document.getElementById('columns') && document.getElementById('columns').dataset.firstRenderMs")) && Date.now() - t0 < 180000) await sleep(100);
      await sleep(1000);
      const r = await ev("JSON.stringify({cards: document.querySelectorAll('li.pod').length, long: window.__long, gaps: window.__gaps, list: performance.getEntriesByType('resource').filter(e => e.name.endsWith('/api/v1/pods')).map(e => [e.transferSize, Math.round(e.responseEnd)])})");
      console.log(JSON.stringify({ round, which, firstRenderMs: Number(fr), ...JSON.parse(r) }));
    }
  }
  process.exit(0);
})();
