// retrystorm's page. It draws the panels and their knobs from the data
// `retrystorm page` wrote into the file, starts the Go module (inlined,
// gzipped) in a few workers, and asks them to compute a panel whenever its
// knobs move. Every number comes from Go; this script only draws.
'use strict';

const panels = JSON.parse(document.getElementById('panel-data').textContent);
const byName = new Map(panels.map((p) => [p.name, p]));

const state = {
  seed: 1,
  values: Object.fromEntries(panels.map((p) => [p.name, {}])), // moved knobs only
  views: {},
  computed: new Set(), // the panels this browser has computed at least once
};

// Every panel on its defaults with seed 1, as `retrystorm page` computed
// it with the same Go code when it wrote this file: drawn at once, then
// computed again by the workers, which must agree.
const precomputed = new Map(JSON.parse(document.getElementById('views').textContent).map((v) => [v.name, v]));

// Timings, in milliseconds since the page started loading; the browser
// test reads them. asked holds the id of each panel's latest job, so that
// the test can wait for the run that belongs to its own input.
const timings = (window.retrystormTimings = { boot: {}, runs: [], asked: {} });

let nextID = 1;

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v;
    else if (v !== false && v != null) e.setAttribute(k, v === true ? '' : v);
  }
  e.append(...children);
  return e;
};

// ---- Panels and knobs ------------------------------------------------

function buildPage() {
  const nav = $('#nav');
  const main = $('#panels');
  for (const p of panels) {
    nav.append(el('a', { href: '#' + p.name, id: 'nav-' + p.name, 'data-state': 'pending' },
      el('span', { class: 'dot' }), shortTitle(p.title)));
    main.append(buildPanel(p));
  }
}

function shortTitle(title) {
  return title.split(':')[0];
}

function buildPanel(p) {
  const controls = el('aside', { class: 'controls' }, el('h3', { text: 'Knobs' }));
  if (p.fixed) controls.append(el('p', { class: 'fixed', text: p.fixed }));
  for (const k of p.knobs || []) controls.append(buildKnob(p, k));
  const actions = el('div', { class: 'actions' });
  if ((p.knobs || []).length > 0) {
    const reset = el('button', { type: 'button', class: 'reset', text: 'Reset to defaults' });
    reset.addEventListener('click', () => resetPanel(p));
    actions.append(reset);
  }
  controls.append(actions);
  if (p.config) controls.append(buildYAML(p));

  const results = el('div', { class: 'results' },
    el('div', { class: 'progress' }, el('div')),
    el('div', { class: 'stale' }, el('p', { class: 'placeholder', text: 'Computing…' })));
  return el('section', { class: 'panel', id: p.name, 'data-panel': p.name },
    el('header', { class: 'panel-head' },
      el('div', {}, el('h2', { text: p.title }), el('p', { class: 'summary', text: p.summary })),
      el('div', { class: 'head-side' },
        el('div', { class: 'badge', 'data-state': 'pending' }, el('span', { class: 'dot' }),
          el('span', { class: 'badge-text', text: 'computing' }), el('span', { class: 'ms' })),
        el('p', { class: 'engine' }))),
    el('div', { class: 'panel-body' }, controls, results));
}

function buildKnob(p, k) {
  const id = `${p.name}-${k.key}`;
  const out = el('output', { for: id });
  let input;
  if (k.kind === 'range') {
    input = el('input', { type: 'range', id, min: k.min, max: k.max, step: k.step, value: k.value });
  } else if (k.kind === 'select') {
    input = el('select', { id }, ...k.options.map((o) => el('option', { value: o, text: o, selected: o === k.value })));
  } else {
    input = el('input', { type: 'checkbox', id, checked: k.value === 'true' });
  }
  const box = el('div', { class: 'knob', 'data-key': k.key, title: k.hint || '' },
    el('div', { class: 'knob-top' }, el('label', { for: id, text: k.label }), out));
  box.append(k.kind === 'check' ? el('div', { class: 'switch' }, input, el('span', { class: 'knob-meta', text: k.hint })) : input);
  box.append(el('div', { class: 'knob-meta' }));
  const value = () => (k.kind === 'check' ? String(input.checked) : input.value);
  // A slider shows as many decimals as its step has: 0.10, not 0.1.
  const decimals = k.kind === 'range' ? (String(k.step).split('.')[1] || '').length : 0;
  const show = () => {
    const v = value();
    const text = k.kind === 'range' ? Number(v).toFixed(decimals) : v;
    out.textContent = k.kind === 'check' ? (v === 'true' ? 'on' : 'off') : k.unit ? `${text} ${k.unit}` : text;
  };
  const changed = () => {
    show();
    const v = value();
    if (v === k.value) delete state.values[p.name][k.key];
    else state.values[p.name][k.key] = v;
    box.toggleAttribute('data-moved', v !== k.value);
    schedule(p.name);
  };
  // A slider recomputes as it moves on a fast panel, and when let go on
  // a heavy one.
  input.addEventListener(k.kind === 'range' && !p.heavy ? 'input' : 'change', changed);
  if (k.kind === 'range') input.addEventListener('input', show);
  box.reset = () => {
    if (k.kind === 'check') input.checked = k.value === 'true';
    else input.value = k.value;
    box.removeAttribute('data-moved');
    show();
  };
  show();
  return box;
}

// knobMeta says which fleets a knob changes and which are its controls,
// with the names the last run gave them.
function knobMeta(p, k, names) {
  const meta = $(`.knob[data-key="${k.key}"] > .knob-meta`, document.getElementById(p.name));
  if (!meta || !k.changes) return;
  const chips = (idx, cls) => idx.map((i) => el('span', { class: cls, text: names[i] }));
  meta.replaceChildren(el('span', { class: 'meta-label', text: 'changes' }), ...chips(k.changes, 'chip'));
  if (k.controls && k.controls.length > 0) {
    meta.append(el('span', { class: 'meta-label', text: `control (${k.control})` }), ...chips(k.controls, 'chip ctl'));
  }
}

function resetPanel(p) {
  for (const box of document.getElementById(p.name).querySelectorAll('.knob')) box.reset();
  state.values[p.name] = {};
  schedule(p.name);
}

function buildYAML(p) {
  const pre = el('pre', { class: 'yaml-text' });
  const copy = el('button', { type: 'button', text: 'Copy' });
  copy.addEventListener('click', async () => {
    const text = pre.textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Without the clipboard API, select the text for Ctrl-C.
      getSelection().selectAllChildren(pre);
      document.execCommand('copy');
    }
    copy.textContent = 'Copied';
    setTimeout(() => (copy.textContent = 'Copy'), 1200);
  });
  const save = el('button', { type: 'button', text: 'Save ' + p.config });
  save.addEventListener('click', () => {
    const url = URL.createObjectURL(new Blob([pre.textContent], { type: 'text/yaml' }));
    const a = el('a', { href: url, download: p.config });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  return el('details', { class: 'yaml' },
    el('summary', { text: 'Scenario file of these settings' }),
    pre,
    el('div', { class: 'actions' }, copy, save),
    el('p', { class: 'run-hint' }, 'Run it with ', el('code', { text: `retrystorm run ${p.config}` }),
      ' or ', el('code', { text: `retrystorm ${p.name} --config ${p.config}` }), '.'));
}

// ---- Computing -------------------------------------------------------

// cores is how many panels the page computes at once: one per core the
// browser reports, two to four.
const cores = Math.max(2, Math.min(4, navigator.hardwareConcurrency || 2));

// Pool runs the Go module in a few workers, one panel per worker at a
// time. A panel asked for again while it waits is asked once, with its
// latest knobs; a panel is never computed twice at once; a knob's job
// goes before the checks of precomputed panels; the checks take at most
// one worker per core; and heavy panels never take the last worker. The
// pool has one worker more than cores, which the checks leave idle, so
// that a knob moved while every core checks a panel starts at once
// rather than after the seconds a heavy panel takes.
class Pool {
  constructor(url, size) {
    this.url = url;
    this.queue = new Map(); // panel → job, in the order first asked
    this.slots = [];
    this.module = null;
    this.grow(size);
  }

  // grow starts workers up to size. Each worker gets the module as soon
  // as it is compiled.
  grow(size) {
    while (this.slots.length < size) {
      const n = this.slots.length + 1;
      const slot = { name: `worker ${n}`, worker: new Worker(this.url, { name: `retrystorm-${n}` }), ready: false, job: null };
      slot.worker.onmessage = (e) => this.receive(slot, e.data);
      slot.worker.onerror = (e) => console.error(`retrystorm: ${slot.name} failed: ${e.message}`);
      if (this.module) slot.worker.postMessage({ type: 'init', module: this.module });
      this.slots.push(slot);
    }
  }

  start(module) {
    this.module = module;
    for (const slot of this.slots) slot.worker.postMessage({ type: 'init', module });
  }

  run(panel, job) {
    this.queue.set(panel, job);
    this.pump();
  }

  pump() {
    for (const slot of this.slots) {
      if (!slot.ready || slot.job) continue;
      const busy = this.slots.filter((s) => s.job);
      // The editor's jobs carry their own weight (editor.js).
      const weight = (job) => (byName.get(job.panel) || job).heavy;
      const heavy = busy.filter((s) => weight(s.job)).length;
      const checks = busy.filter((s) => s.job.verify).length;
      // What a person asked for first; the checks of the precomputed
      // panels wait (they change nothing on screen).
      const ready = [...this.queue.values()].filter((job) =>
        !busy.some((s) => s.job.panel === job.panel) && !(weight(job) && heavy >= this.slots.length - 1) &&
        !(job.verify && checks >= cores));
      const next = ready.find((job) => !job.verify) || ready[0];
      if (!next) return;
      this.queue.delete(next.panel);
      slot.job = next;
      slot.worker.postMessage({ type: next.kind || 'run', panel: next.target || next.panel, key: next.panel, id: next.id, request: JSON.stringify(next.request) });
    }
  }

  receive(slot, m) {
    switch (m.type) {
      case 'ready':
        slot.ready = true;
        timings.boot.ready ??= performance.now();
        this.pump();
        break;
      case 'progress':
        progress(m.key || m.panel, m.done, m.total);
        break;
      case 'console':
        console[m.level](`[retrystorm ${slot.name}]`, m.text);
        break;
      case 'result': {
        const job = slot.job;
        slot.job = null;
        // The next job first: the worker computes while this thread
        // draws.
        this.pump();
        if (job.onResult) {
          job.onResult(JSON.parse(m.view), m.ms); // the editor's (editor.js)
          break;
        }
        job.received = performance.now();
        const view = JSON.parse(m.view);
        job.parsed = performance.now();
        if (job.verify && agrees(m.panel, view)) confirm(m.panel, job, m.ms);
        else draw(m.panel, view, job, m.ms);
        break;
      }
      case 'exit':
        console.error(`retrystorm: the simulator in ${slot.name} stopped`);
        status('The simulator stopped; reload the page.');
        break;
    }
  }
}

let pool = null;

// schedule asks the pool for panel name with its current knobs. A verify
// job computes a panel the page already shows (precomputed): it redraws
// only if the numbers differ, which is an error.
function schedule(name, verify = false) {
  if (!pool || !pool.module) return; // the first round is scheduled when the module is up
  const job = {
    id: nextID++,
    panel: name,
    request: { seed: state.seed, values: { ...state.values[name] } },
    since: performance.now(),
    verify,
  };
  timings.asked[name] = job.id;
  pool.run(name, job);
  if (verify) return; // the numbers shown are right: nothing to dim
  const results = $('.results', document.getElementById(name));
  // Dim the old numbers only if the new ones take a moment: a fast
  // panel should not flicker as a slider moves.
  clearTimeout(results._dim);
  results._dim = setTimeout(() => results.setAttribute('data-busy', ''), 180);
}

// loadModule inflates the module with the browser's own gzip and compiles
// it as it streams in.
async function loadModule() {
  const b64 = document.getElementById('module').textContent.trim();
  const gz = Uint8Array.fromBase64 ? Uint8Array.fromBase64(b64) : decodeBase64(b64);
  timings.boot.gzipBytes = gz.length;
  let size = 0;
  const count = new TransformStream({
    transform(chunk, out) {
      size += chunk.byteLength;
      out.enqueue(chunk);
    },
  });
  const wasm = new Blob([gz]).stream().pipeThrough(new DecompressionStream('gzip')).pipeThrough(count);
  const module = await WebAssembly.compileStreaming(new Response(wasm, { headers: { 'Content-Type': 'application/wasm' } }));
  timings.boot.moduleBytes = size;
  timings.boot.compiled = performance.now();
  return module;
}

function decodeBase64(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function boot() {
  timings.boot.script = performance.now();
  buildPage();
  buildEditor();
  editorLink();
  wireSeed();
  wireTips();
  for (const p of panels) if (precomputed.has(p.name)) draw(p.name, precomputed.get(p.name), null, null);
  try {
    const src = document.getElementById('wasm-exec').textContent + '\n;\n' + document.getElementById('worker-src').textContent;
    const url = URL.createObjectURL(new Blob([src], { type: 'text/javascript' }));
    // One worker until the first panel is computed: while the module's
    // code is cold, the browser needs a free core to optimise it.
    pool = new Pool(url, 1);
    if (document.readyState === 'loading') await new Promise((ok) => document.addEventListener('DOMContentLoaded', ok, { once: true }));
    pool.start(await loadModule());
    editorReady();
    status(`Simulator loaded: ${mb(timings.boot.moduleBytes)} of WebAssembly (${mb(timings.boot.gzipBytes)} in this page), ` +
      `compiled in ${Math.round(timings.boot.compiled - timings.boot.script)} ms. Computing every panel again here…`);
    // A panel whose knobs moved meanwhile is computed for them instead.
    for (const p of firstRound(false)) schedule(p.name, isDefault(p.name));
  } catch (err) {
    console.error('retrystorm: cannot load the simulator: ' + err);
    status('This browser cannot run the simulator: ' + err);
  }
}

// firstRound lists the panels the page computes on load, cheapest first:
// the fast ones, or the heavy ones, which wait for the first computation.
// (Heaviest first, which would finish the round sooner on paper, or a
// worker per core from the start, both finished it later in Chromium on
// two cores: cold code runs slower still without a core left over for V8
// to optimise it; BENCHMARKS.md, issue 29.)
function firstRound(heavy) {
  return [...panels].sort((a, b) => a.cost - b.cost).filter((p) => p.heavy === heavy);
}

function wireSeed() {
  const input = $('#seed');
  const set = (n) => {
    state.seed = n;
    input.value = String(n);
    for (const p of panels) schedule(p.name);
  };
  input.addEventListener('change', () => {
    const n = Number(input.value);
    if (Number.isInteger(n) && n >= 0 && n <= 4294967295) set(n);
    else input.value = String(state.seed);
  });
  $('#reseed').addEventListener('click', () => set(1 + Math.floor(Math.random() * 99999)));
}

// ---- Drawing ---------------------------------------------------------

function draw(name, view, job, computeMs) {
  const p = byName.get(name);
  const section = document.getElementById(name);
  const results = $('.results', section);
  const old = state.views[name];
  state.views[name] = view;
  progress(name, 0, 0);

  const body = el('div', { class: 'stale' });
  if (view.error) {
    body.append(el('p', { class: 'error', text: view.error }));
    // A setting the scenario refuses is the user's to fix; anything else
    // is a bug.
    if (view.error.startsWith('internal error')) console.error(`retrystorm: ${name}: ${view.error}`);
  } else {
    for (const para of view.intro || []) body.append(el('p', { class: 'intro', text: para }));
    body.append(el('h3', { text: 'Claims' }), claimList(view.claims || []));
    (view.tables || []).forEach((t, i) => body.append(table(t, old && !old.error ? (old.tables || [])[i] : null)));
    const charts = el('div', { class: 'charts' });
    charts.innerHTML = withTips((view.charts || []).join(''));
    const figures = el('div', { class: 'figures' });
    figures.innerHTML = withTips((view.figures || []).join(''));
    body.append(charts, figures);
    prepareSVG(charts);
    prepareSVG(figures);
    if (view.findings && view.findings.length) {
      body.append(el('h3', { text: 'Findings' }), el('ul', { class: 'findings' }, ...view.findings.map((f) => el('li', { text: f }))));
    }
    for (const n of view.notes || []) body.append(el('p', { class: 'note', text: n }));
    if (view.yaml != null) $('.yaml-text', section).textContent = view.yaml;
    const names = view.fleets || p.fleets || [];
    for (const k of p.knobs || []) {
      knobMeta(p, k, names);
      $(`.knob[data-key="${k.key}"]`, section).toggleAttribute('data-inactive', (view.inactive || []).includes(k.key));
    }
  }
  $('.stale', results).replaceWith(body);
  clearTimeout(results._dim);
  results.removeAttribute('data-busy');

  if (job) {
    if (job.verify) console.error(`retrystorm: ${name}: this browser computed other numbers than retrystorm page did for the defaults`);
    const run = record(name, job, computeMs);
    // painted: input to the end of the next frame, which lays out and
    // paints the new panel (a task queued from requestAnimationFrame runs
    // after that frame).
    requestAnimationFrame(() => setTimeout(() => (run.painted = performance.now() - job.since)));
  }
  const held = (view.claims || []).filter((c) => c.holds).length;
  const total = (view.claims || []).length;
  const verdict = view.error ? 'bad' : held === total ? 'ok' : 'bad';
  // Which engine answered: the simulator, or for the sweep the analytic
  // model, with the simulator where the model does not answer.
  const engine = $('.engine', section);
  engine.textContent = view.engine ? `answered by the ${view.engine}` : '';
  engine.title = (view.sources || []).map((s) =>
    `${s.policy}: the ${s.engine}${s.simulated ? ` (the simulator in the ${s.simulated} cells near the model's boundary)` : ''}`).join('\n');
  const badge = $('.badge', section);
  badge.dataset.state = verdict;
  $('.badge-text', badge).textContent = view.error ? 'error' : `${held} of ${total} claims hold`;
  $('.ms', badge).textContent = job ? `${Math.round(computeMs)} ms` : '';
  document.getElementById('nav-' + name).dataset.state = verdict;
  if (job) section.dataset.computed = String(job.id);
  score();
  milestones();
}

// record notes a computation of panel name: roundtrip is input to redrawn
// panel; of it, compute is Go's time in the worker, parse the JSON on this
// thread, and draw the DOM update (zero for a confirmed panel).
function record(name, job, computeMs) {
  const now = performance.now();
  const run = {
    panel: name, id: job.id, compute: computeMs, roundtrip: now - job.since, verify: job.verify,
    parse: job.parsed - job.received, draw: now - job.parsed, at: now,
  };
  timings.runs.push(run);
  state.computed.add(name);
  computedMilestones();
  return run;
}

// isDefault reports whether panel name shows its precomputed defaults.
function isDefault(name) {
  return precomputed.has(name) && state.seed === 1 && Object.keys(state.values[name]).length === 0;
}

// agrees reports whether view has the very numbers the page shows for
// panel name from retrystorm page.
function agrees(name, view) {
  const pre = precomputed.get(name);
  return pre != null && JSON.stringify(view) === JSON.stringify(pre);
}

// confirm marks panel name as computed here, with the numbers it shows.
function confirm(name, job, computeMs) {
  $('.ms', document.getElementById(name)).textContent = `${Math.round(computeMs)} ms`;
  record(name, job, computeMs);
}

function claimList(claims) {
  return el('ul', { class: 'claims' }, ...claims.map((c) =>
    el('li', { 'data-holds': String(c.holds) },
      el('span', { class: 'mark', text: c.holds ? '✓' : '✗', title: c.holds ? 'holds' : 'does not hold' }),
      el('span', {}, el('span', { class: 'claim-text', text: c.text }), el('span', { class: 'detail', text: c.detail })))));
}

// table draws a table as the command prints it; the cells that changed
// since the last run flash.
function table(t, old) {
  const emph = new Set((t.emphasis || []).map(([r, c]) => `${r},${c}`));
  const same = old && old.columns.length === t.columns.length && old.rows.length === t.rows.length;
  const tbl = el('table', {},
    ...(t.title ? [el('caption', { text: t.title })] : []),
    el('thead', {}, el('tr', {}, ...t.columns.map((c) => el('th', { class: c.right ? 'r' : false, text: c.name })))),
    el('tbody', {}, ...t.rows.map((row, r) => el('tr', {}, ...t.columns.map((c, i) => {
      const cls = [c.right ? 'r' : '', emph.has(`${r},${i}`) ? 'e' : '', same && old.rows[r][i] !== row[i] ? 'changed' : '']
        .filter(Boolean).join(' ');
      return el('td', { class: cls || false, text: row[i] ?? '' });
    })))));
  return el('div', { class: 'tablewrap' }, tbl);
}

function progress(name, done, total) {
  const bar = $('.progress', document.getElementById(name));
  bar.toggleAttribute('data-on', total > 0 && done < total);
  bar.firstChild.style.width = total > 0 ? `${(100 * done) / total}%` : '0';
}

function score() {
  let held = 0;
  let total = 0;
  let failed = false;
  for (const v of Object.values(state.views)) {
    failed ||= Boolean(v.error);
    for (const c of v.claims || []) {
      total++;
      if (c.holds) held++;
    }
  }
  $('#score-held').textContent = held;
  $('#score-total').textContent = total;
  const complete = panels.every((p) => state.views[p.name]);
  $('#score').dataset.state = failed || held < total ? 'bad' : complete ? 'ok' : 'pending';
}

// milestones notes when the first panel, the fast ones and every one are
// on screen, whoever computed them.
function milestones() {
  const b = timings.boot;
  b.firstRender ??= performance.now();
  const light = panels.filter((p) => !p.heavy).every((p) => state.views[p.name]);
  if (light && b.lightRendered == null) b.lightRendered = performance.now();
  if (panels.every((p) => state.views[p.name]) && b.allRendered == null) b.allRendered = performance.now();
}

// computedMilestones notes when this browser first computed a panel, and
// when it has computed every one; after the first, the heavy panels are
// computed too, on more workers.
function computedMilestones() {
  const b = timings.boot;
  if (b.firstComputed == null) {
    b.firstComputed = performance.now();
    // Then a worker per core for the checks, heavy panels included, and
    // one more for the knobs.
    pool.grow(cores + 1);
    for (const p of firstRound(true)) schedule(p.name, isDefault(p.name));
  }
  const light = panels.filter((p) => !p.heavy).every((p) => state.computed.has(p.name));
  if (light && b.lightComputed == null) b.lightComputed = performance.now();
  if (panels.every((p) => state.computed.has(p.name)) && b.allComputed == null) {
    b.allComputed = performance.now();
    status(`Simulator: ${mb(b.moduleBytes)} of Go compiled to WebAssembly, ready in ${Math.round(b.compiled)} ms; ` +
      `every panel shown at ${Math.round(b.allRendered)} ms as retrystorm page computed it, and computed again here by ${(b.allComputed / 1000).toFixed(1)} s. Move a knob.`);
  }
}

function status(text) {
  $('#status').textContent = text;
}

function mb(n) {
  return (n / (1 << 20)).toFixed(1) + ' MB';
}

// ---- Reading the charts ----------------------------------------------

// tipRect is a rectangle of the report's SVG with a <title> tooltip, but
// for the shaded spans (class="shade"), whose tooltip the browser shows:
// the hover columns of a chart and the cells of a map. The title's text is
// escaped for HTML, so it can stand in a quoted attribute as it is.
const tipRect = /<rect((?: (?!class="shade")[a-z-]+="[^"]*")*)><title>([^<]*)<\/title><\/rect>/g;

// withTips moves the values the report's SVG carries in <title> tooltips
// into data-tip attributes, for the read-out below (the browser's own
// tooltip would come late and repeat it). It rewrites the text before the
// browser parses it: a chart has hundreds of columns, and making their
// titles only to remove them again cost a fifth of a redraw.
function withTips(svg) {
  return svg.replace(tipRect, '<rect$1 data-tip="$2"></rect>');
}

// prepareSVG notes each chart's line colours by name, for the read-out.
function prepareSVG(root) {
  for (const svg of root.querySelectorAll('svg.chart')) {
    const colours = {};
    for (const line of svg.querySelectorAll('polyline')) {
      const t = line.querySelector('title');
      // The control's near black follows the text colour, as in the CSS.
      const stroke = line.getAttribute('stroke');
      if (t) colours[t.textContent] = stroke === '#222222' ? 'var(--fg)' : stroke;
    }
    svg._colours = colours;
  }
}

function wireTips() {
  const tip = $('#tip');
  let guide = null;
  const hide = () => {
    tip.hidden = true;
    if (guide) guide.remove();
    guide = null;
  };
  document.addEventListener('pointerover', (e) => {
    const rect = e.target.closest && e.target.closest('rect[data-tip]');
    if (!rect) return hide();
    const svg = rect.ownerSVGElement;
    const [head, ...rows] = rect.dataset.tip.split('\n');
    tip.replaceChildren(el('div', { class: 'tip-head', text: head }), ...rows.map((r) => {
      const i = r.lastIndexOf(': ');
      const name = i > 0 ? r.slice(0, i) : r;
      return el('div', { class: 'tip-row' },
        el('i', { style: `background:${(svg._colours || {})[name] || 'transparent'}` }),
        el('span', { text: name }), el('span', { text: i > 0 ? r.slice(i + 2) : '' }));
    }));
    tip.hidden = false;
    if (guide) guide.remove();
    guide = null;
    if (rect.parentNode.classList.contains('hover')) {
      const x = Number(rect.getAttribute('x')) + Number(rect.getAttribute('width')) / 2;
      const y = Number(rect.getAttribute('y'));
      guide = document.createElementNS('http://www.w3.org/2000/svg', 'line');
      guide.setAttribute('class', 'guide');
      for (const [k, v] of Object.entries({ x1: x, x2: x, y1: y, y2: y + Number(rect.getAttribute('height')) })) guide.setAttribute(k, v);
      rect.parentNode.before(guide);
    }
  });
  document.addEventListener('pointermove', (e) => {
    if (tip.hidden) return;
    const pad = 16;
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    const x = e.clientX + pad + w > innerWidth ? e.clientX - pad - w : e.clientX + pad;
    const y = Math.min(e.clientY + pad, innerHeight - h - 4);
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  });
  document.addEventListener('pointerleave', hide);
  addEventListener('scroll', hide, { passive: true });
}

boot();
