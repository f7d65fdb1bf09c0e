// The worker: one instance of retrystorm's Go module, computing one panel
// at a time, off the page's main thread so that the knobs never freeze.
// The page prepends Go's wasm_exec.js, which defines Go.
'use strict';

// Go prints to the console; a worker's console is not the page's, so
// everything said here is said there too.
for (const level of ['log', 'info', 'warn', 'error']) {
  const own = console[level].bind(console);
  console[level] = (...args) => {
    own(...args);
    self.postMessage({ type: 'console', level, text: args.map(String).join(' ') });
  };
}

self.onmessage = async ({ data: m }) => {
  if (m.type === 'init') {
    try {
      const go = new Go();
      const instance = await WebAssembly.instantiate(m.module, go.importObject);
      // run returns when the Go program exits, which it never should.
      go.run(instance).then(() => self.postMessage({ type: 'exit' }));
      self.postMessage({ type: 'ready' });
    } catch (err) {
      console.error('cannot start the simulator: ' + err);
    }
    return;
  }
  if (m.type === 'run' || m.type === 'check') {
    const progress = (done, total) => self.postMessage({ type: 'progress', panel: m.panel, key: m.key, done, total });
    const t0 = performance.now();
    let view;
    try {
      if (m.type === 'check') {
        // The editor's: its scenario checked and its cost estimated.
        const req = JSON.parse(m.request);
        view = self.retrystorm.check(req.yaml, req.as);
      } else {
        view = self.retrystorm.run(m.panel, m.request, progress);
      }
    } catch (err) {
      view = JSON.stringify({ name: m.panel, error: 'internal error: ' + err });
    }
    self.postMessage({ type: 'result', panel: m.panel, key: m.key, id: m.id, view, ms: performance.now() - t0 });
  }
};
