// The scenario editor (issue 39): a scenario of the user's own, typed,
// pasted, loaded from a file, picked from the examples, or carried in the
// page's address as #scenario=<base64url of the YAML>, is checked as it
// changes (errors with their line), its cost estimated, and run in the
// page's workers: as `retrystorm run` does, or as an experiment does with
// --config, claims included. It runs at once when the estimate is short,
// else when Run is pressed. This script follows page.js in the same
// <script> and uses its helpers (el, $, the pool, the drawing).
'use strict';

const editorData = JSON.parse(document.getElementById('editor-data').textContent);

const editor = {
  as: 'run', // what runs the scenario: 'run', or an experiment's name
  check: null, // the latest check of the text shown
  checking: 0, // the id of the check asked last
  autoRun: false, // run once the pending check says the cost is small
  pending: null, // a check asked before the simulator was up
};

// For the browser test: every check and run, as they end.
const editorLog = (window.retrystormEditor = { checks: [], runs: [], loaded: null });

function buildEditor() {
  const text = el('textarea', { id: 'editor-text', spellcheck: 'false', autocomplete: 'off', 'aria-label': 'scenario YAML',
    placeholder: 'Paste a scenario file here, pick an example, or load a file.' });
  const gutter = el('pre', { class: 'gutter', 'aria-hidden': 'true' });
  const examples = el('select', { id: 'editor-examples', 'aria-label': 'examples' }, el('option', { value: '', text: 'Examples…' }));
  const groups = new Map();
  editorData.examples.forEach((x, i) => {
    if (!groups.has(x.group)) examples.append(groups.set(x.group, el('optgroup', { label: x.group })).get(x.group));
    groups.get(x.group).append(el('option', { value: String(i), text: `${x.name}: ${x.title}` }));
  });
  const as = el('select', { id: 'editor-as', 'aria-label': 'run as' }, el('option', { value: 'run', text: 'retrystorm run' }),
    ...panels.filter((p) => p.config).map((p) => el('option', { value: p.name, text: `retrystorm ${p.name} --config` })));
  const file = el('input', { type: 'file', id: 'editor-file', accept: '.yaml,.yml,text/yaml,text/plain', hidden: true });
  const buttons = {
    run: el('button', { type: 'button', id: 'editor-run', class: 'primary', text: 'Run' }),
    save: el('button', { type: 'button', id: 'editor-save', text: 'Save' }),
    load: el('button', { type: 'button', id: 'editor-load', text: 'Load…' }),
    share: el('button', { type: 'button', id: 'editor-share', text: 'Share link' }),
  };
  const section = el('section', { class: 'workbench', id: 'editor' },
    el('header', { class: 'panel-head' },
      el('div', {}, el('h2', { text: 'Your scenario' }),
        el('p', { class: 'summary', text: 'Edit a panel\'s scenario, paste your own or pick an example; run it here, save it, share it as a link. Nothing leaves this page.' })),
      el('div', { class: 'head-side' },
        el('div', { class: 'badge', 'data-state': 'pending' }, el('span', { class: 'dot' }), el('span', { class: 'badge-text', text: 'not run' }), el('span', { class: 'ms' })))),
    el('div', { class: 'editor-body' },
      el('div', { class: 'toolbar' }, examples, as, buttons.run, buttons.save, buttons.load, buttons.share, file),
      el('div', { class: 'editor-area' }, gutter, text),
      el('p', { class: 'editor-status', id: 'editor-status', role: 'status', text: 'Loading the simulator…' }),
      el('div', { class: 'progress' }, el('div')),
      el('div', { class: 'results' }, el('div', { class: 'stale' }))));
  document.getElementById('panels').before(section);

  let timer = null;
  text.addEventListener('input', () => {
    lines(text, gutter, 0);
    clearTimeout(timer);
    timer = setTimeout(() => checkEditor(false), 250);
  });
  text.addEventListener('scroll', () => (gutter.scrollTop = text.scrollTop));
  examples.addEventListener('change', () => {
    const x = editorData.examples[Number(examples.value)];
    if (x) loadEditor(x.yaml, x.as, false);
    examples.value = '';
  });
  as.addEventListener('change', () => {
    editor.as = as.value;
    checkEditor(false);
  });
  buttons.run.addEventListener('click', runEditor);
  buttons.save.addEventListener('click', saveEditor);
  buttons.load.addEventListener('click', () => file.click());
  file.addEventListener('change', async () => {
    const f = file.files[0];
    if (!f) return;
    if (f.size > editorData.maxFile) {
      editorStatus(`${f.name} is ${f.size} bytes: a scenario file is at most ${editorData.maxFile}.`, true);
    } else {
      loadEditor(await f.text(), editor.as, false);
    }
    file.value = '';
  });
  buttons.share.addEventListener('click', shareEditor);
  lines(text, gutter, 0);
}

// lines numbers the text's lines in the gutter, marking line bad.
function lines(text, gutter, bad) {
  const n = text.value.split('\n').length;
  gutter.replaceChildren(...Array.from({ length: n }, (_, i) =>
    el('span', { class: i + 1 === bad ? 'bad' : false, text: String(i + 1) + '\n' })));
  gutter.scrollTop = text.scrollTop;
}

// loadEditor shows yaml in the editor, to run as as; auto runs it once
// its check says it is cheap.
function loadEditor(yaml, as, auto) {
  const text = document.getElementById('editor-text');
  text.value = yaml;
  editor.as = as || 'run';
  const select = document.getElementById('editor-as');
  if ([...select.options].some((o) => o.value === editor.as)) select.value = editor.as;
  else editor.as = select.value = 'run';
  lines(text, $('#editor .gutter'), 0);
  checkEditor(auto);
}

// checkEditor asks a worker to check the text and estimate its cost.
function checkEditor(auto) {
  const yaml = document.getElementById('editor-text').value;
  editor.autoRun = auto;
  editor.check = null;
  if (yaml.trim() === '') {
    editorStatus('Paste a scenario file, pick an example, or load a file.', false);
    return;
  }
  const job = { id: nextID++, panel: 'editor-check', kind: 'check', request: { yaml, as: editor.as }, heavy: false, since: performance.now() };
  editor.checking = job.id;
  job.onResult = (check) => checked(job, check);
  if (!pool || !pool.module) {
    editor.pending = job;
    return;
  }
  pool.run(job.panel, job);
}

// checked shows a check's verdict, and runs the scenario if it was to
// run at once and is cheap.
function checked(job, c) {
  if (job.id !== editor.checking) return; // the text changed since
  editor.check = c;
  editorLog.checks.push({ ok: c.ok, line: c.line || 0, error: c.error || '', seconds: c.seconds, auto: c.auto });
  lines(document.getElementById('editor-text'), $('#editor .gutter'), c.ok ? 0 : c.line || 0);
  if (!c.ok) {
    const where = c.line ? `line ${c.line}${c.column ? `, column ${c.column}` : ''}: ` : '';
    editorStatus(where + c.error, true);
    return;
  }
  const est = c.seconds < 1 ? 'under a second' : `up to ${Math.ceil(c.seconds)} s`;
  const runs = c.as === 'run' ? 'retrystorm run' : `retrystorm ${c.as} --config`;
  editorStatus(`Valid: ${c.name}, ${c.fleets.length} fleet${c.fleets.length === 1 ? '' : 's'}; runs as ${runs} in ${est} here` +
    (c.auto ? '.' : ', by the simulator\'s bound on its work: press Run.'), false);
  if (editor.autoRun && c.auto) runEditor();
  editor.autoRun = false;
}

// runEditor runs the checked text in a worker.
function runEditor() {
  const yaml = document.getElementById('editor-text').value;
  if (!pool || !pool.module || yaml.trim() === '') return;
  const job = { id: nextID++, panel: 'editor', target: editor.as, request: { seed: state.seed, yaml }, heavy: true, since: performance.now() };
  job.onResult = (view, ms) => drawEditor(view, job, ms);
  const badge = $('#editor .badge');
  badge.dataset.state = 'pending';
  $('.badge-text', badge).textContent = 'running';
  $('#editor .results').setAttribute('data-busy', '');
  pool.run(job.panel, job);
}

// drawEditor shows a run's view as a panel's: claims, tables, charts.
function drawEditor(view, job, ms) {
  const section = document.getElementById('editor');
  progress('editor', 0, 0);
  const body = el('div', { class: 'stale' });
  if (view.error) {
    body.append(el('p', { class: 'error', text: view.error }));
  } else {
    body.append(el('h3', { text: view.title || 'Your scenario' }));
    for (const para of view.intro || []) body.append(el('p', { class: 'intro', text: para }));
    body.append(el('h3', { text: 'Claims' }), (view.claims || []).length ? claimList(view.claims)
      : el('p', { class: 'note', text: 'A scenario file states no expectations: run it as an experiment (--config) for claims.' }));
    for (const t of view.tables || []) body.append(table(t, null));
    const charts = el('div', { class: 'charts' });
    charts.innerHTML = withTips((view.charts || []).join(''));
    const figures = el('div', { class: 'figures' });
    figures.innerHTML = withTips((view.figures || []).join(''));
    body.append(charts, figures);
    prepareSVG(charts);
    prepareSVG(figures);
    for (const n of view.notes || []) body.append(el('p', { class: 'note', text: n }));
  }
  $('.results', section).replaceChildren(body);
  $('.results', section).removeAttribute('data-busy');
  const held = (view.claims || []).filter((c) => c.holds).length;
  const total = (view.claims || []).length;
  const badge = $('.badge', section);
  badge.dataset.state = view.error || held < total ? 'bad' : 'ok';
  $('.badge-text', badge).textContent = view.error ? 'error' : total ? `${held} of ${total} claims hold` : 'ran';
  $('.ms', badge).textContent = `${Math.round(ms)} ms`;
  editorLog.runs.push({ id: job.id, as: job.target, error: view.error || '', claims: total, held, tables: (view.tables || []).length, ms });
}

function editorStatus(text, bad) {
  const s = document.getElementById('editor-status');
  s.textContent = text;
  s.toggleAttribute('data-bad', bad);
}

function saveEditor() {
  const yaml = document.getElementById('editor-text').value;
  const name = ((editor.check && editor.check.name) || 'scenario').replace(/[^\w.-]+/g, '_');
  const url = URL.createObjectURL(new Blob([yaml], { type: 'text/yaml' }));
  el('a', { href: url, download: name + '.yaml' }).click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// shareEditor puts the scenario in the page's address and copies it.
async function shareEditor() {
  const yaml = document.getElementById('editor-text').value;
  const bytes = new TextEncoder().encode(yaml);
  if (bytes.length > editorData.maxBytes) {
    editorStatus(`The scenario is ${bytes.length} bytes: a link carries at most ${editorData.maxBytes}.`, true);
    return;
  }
  let hash = '#scenario=' + toBase64URL(bytes);
  if (editor.as !== 'run') hash += '&as=' + encodeURIComponent(editor.as);
  history.replaceState(null, '', hash);
  try {
    await navigator.clipboard.writeText(location.href);
    editorStatus('The link to this scenario is in the address bar, and copied.', false);
  } catch {
    editorStatus('The link to this scenario is in the address bar.', false);
  }
}

function toBase64URL(bytes) {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// scenarioFromURL reads #scenario=<base64url>[&as=NAME] (with or without
// padding), bounded before it is decoded; it returns null without one,
// and reports a bad one in the editor.
function scenarioFromURL() {
  const params = new URLSearchParams(location.hash.slice(1));
  const b64 = params.get('scenario');
  if (b64 == null) return null;
  const limit = Math.ceil((editorData.maxBytes * 4) / 3) + 2;
  try {
    if (b64.length > limit) throw new Error(`the scenario in the address is over ${editorData.maxBytes} bytes`);
    const std = b64.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
    if (!/^[A-Za-z0-9+/]*$/.test(std) || std.length % 4 === 1) throw new Error('the scenario in the address is not base64url');
    const bin = atob(std + '='.repeat((4 - (std.length % 4)) % 4));
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return { yaml: new TextDecoder('utf-8', { fatal: true }).decode(bytes), as: params.get('as') || 'run' };
  } catch (err) {
    editorStatus('This link\'s scenario cannot be read: ' + err.message, true);
    editorLog.loaded = 'error';
    return null;
  }
}

// editorLink loads a scenario the page's address carries into the
// editor, to be checked and, if cheap, run as soon as the simulator is up.
function editorLink() {
  const linked = scenarioFromURL();
  if (!linked) return;
  editorLog.loaded = 'link';
  loadEditor(linked.yaml, linked.as, true);
  document.getElementById('editor').scrollIntoView();
}

// editorReady is the simulator being up: the check asked meanwhile goes.
function editorReady() {
  if (editor.pending) pool.run(editor.pending.panel, editor.pending);
  else if (editorLog.loaded == null) editorStatus('Paste a scenario file, pick an example, or load a file.', false);
  editor.pending = null;
}
