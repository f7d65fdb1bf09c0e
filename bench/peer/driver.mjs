// driver.mjs runs Stability Sim's engine (marcbrooker/stability-sim)
// headless, from a bundle of it the user builds from their own checkout
// (BENCHMARKS.md, "Stability Sim, side by side", has the command), for the
// comparison in bench/peer_test.go. This file is retrystorm's: it builds
// the peer's components from an example's architecture as the peer's web
// worker does (src/engine/worker.ts, buildComponent and handleStart), runs
// the engine without pacing, and prints JSON on stdout.
//
//   node driver.mjs ENGINE.mjs series EXAMPLE SEED [END]   per-second counts
//   node driver.mjs ENGINE.mjs bench  EXAMPLE SEED END     totals, CPU time, peak memory
//
// EXAMPLE is an id of the peer's src/examples (metastable-retry, ...).
import { performance } from 'node:perf_hooks';

const [enginePath, mode, exampleId, seedArg, endArg] = process.argv.slice(2);
if (!enginePath || !mode || !exampleId) {
  console.error('usage: node driver.mjs ENGINE.mjs series|bench EXAMPLE SEED [END]');
  process.exit(2);
}
const peer = await import(new URL(enginePath, `file://${process.cwd()}/`).href);
const example = peer.EXAMPLES.find((e) => e.id === exampleId);
if (!example) {
  console.error(`no example ${exampleId}: ${peer.EXAMPLES.map((e) => e.id).join(', ')}`);
  process.exit(2);
}
const seed = seedArg ? Number(seedArg) : example.simulationConfig.seed;
const end = endArg ? Number(endArg) : example.simulationConfig.endTime;

// The peer's component classes by type, as its worker's buildComponent.
const classes = {
  client: peer.Client, server: peer.Server, queue: peer.Queue, cache: peer.Cache,
  'load-balancer': peer.LoadBalancer, database: peer.Database, throttle: peer.Throttle,
};
const components = example.architecture.components.map((def) => {
  const { type, ...cfg } = def.config;
  return new classes[type](def.id, cfg);
});
const clients = components.filter((c) => c.type === 'client');

// Count the attempts each client sends: the arrivals its target receives
// from it (first attempts and retries alike).
const attempts = new Map(clients.map((c) => [c.id, 0]));
const targets = new Set(clients.map((c) => components.find((t) => t.id === (c.config.targetComponentId ?? ''))));
for (const target of targets) {
  const handle = target.handleEvent.bind(target);
  target.handleEvent = (event, ctx) => {
    if (event.kind === 'arrival' && attempts.has(event.workUnit.originClientId)) {
      attempts.set(event.workUnit.originClientId, attempts.get(event.workUnit.originClientId) + 1);
    }
    return handle(event, ctx);
  };
}

const config = { ...example.simulationConfig, seed, endTime: end };
const engine = new peer.SimulationEngine(components, example.architecture.connections, config);
const injector = new peer.FailureInjector();
engine.setFailureInjector(injector);
injector.scheduleFailures(config.failureScenarios, (e) => engine.scheduleEvent(e), () => engine.nextId());
const downstream = (id) => example.architecture.connections.filter((c) => c.sourceId === id).map((c) => c.targetId);
const context = {
  currentTime: 0,
  scheduleEvent: (e) => engine.scheduleEvent(e),
  getComponent: (id) => components.find((c) => c.id === id),
  getDownstream: downstream,
  random: () => engine.getRng().random(),
  nextId: () => engine.nextId(),
  recordMetric: (id, name, value, time) => engine.getMetrics().record(id, name, value, time),
};
for (const c of clients) for (const e of c.generateInitialEvents(context)) engine.scheduleEvent(e);

const totals = () => Object.fromEntries(clients.map((c) => [c.id, { ...c.getMetrics(), attempts: attempts.get(c.id) }]));

if (mode === 'bench') {
  // As the peer's worker runs it (src/engine/worker.ts:40, 117-118, 161-169),
  // less the pacing: every half second of simulated time, the latency
  // percentiles of the last ten seconds, which also prunes older entries.
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let last = 0;
  while (!engine.step()) {
    if (engine.currentTime - last >= 0.5) {
      last = engine.currentTime;
      engine.getMetrics().getLatencyPercentiles(Math.max(0, last - 10), last);
    }
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(JSON.stringify({
    example: exampleId, seed, end, clients: totals(),
    cpu_seconds: (cpu.user + cpu.system) / 1e6, wall_seconds: (performance.now() - t0) / 1000,
    max_rss_kib: process.resourceUsage().maxRSS,
  }));
} else {
  // Counts per second of simulated time, each client's, by the second the
  // event happened in (completions and failures when the client heard them).
  const seconds = [];
  let next = 1;
  let last = totals();
  const snap = () => {
    const now = totals();
    const d = {};
    for (const [id, m] of Object.entries(now)) {
      d[id] = {};
      for (const k of ['completedCount', 'failedCount', 'retriedCount', 'timedOutCount', 'attempts']) d[id][k] = m[k] - last[id][k];
    }
    seconds.push(d);
    last = now;
  };
  for (;;) {
    const done = engine.step();
    while (engine.currentTime >= next && next <= end) {
      snap();
      next++;
    }
    if (done) break;
  }
  while (next <= end) {
    snap();
    next++;
  }
  console.log(JSON.stringify({ example: exampleId, seed, end, clients: totals(), seconds }));
}
