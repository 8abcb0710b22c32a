// The reads bench/lifecycle takes before and after archiving, on one running daemon: each a few
// unmeasured reads, then `times` sequential reads on one keep-alive connection, p50 / p99 / max.
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

/** The reads, by name: a path and how many times it is read (the slow /menu builds fewer times). */
export function readPlan({ ownerId, productId, asOf }) {
  const at = encodeURIComponent(asOf);
  return [
    ['menu', `/api/v1/menu?owner_id=${ownerId}`, 10],
    ['menuAsOf', `/api/v1/menu?owner_id=${ownerId}&as_of=${at}`, 6],
    ['asOfPage', `/api/v1/products?owner_id=${ownerId}&limit=100&as_of=${at}`, 50],
    ['asOfId', `/api/v1/products/${productId}?as_of=${at}`, 50],
    ['owners', '/api/v1/owners', 50],
  ];
}

function get(agent, url) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(url, { agent }, (res) => {
      let bytes = 0;
      res.on('data', (chunk) => (bytes += chunk.length));
      res.on('end', () => resolve({ status: res.statusCode, bytes, ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const round1 = (value) => Math.round(value * 10) / 10;

/** Every read of the plan on `base`: { name: { path, reads, status, bytes, p50, p99, max } }. */
export async function measureReads(base, plan, warmup = 2) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const results = {};
  try {
    for (const [name, path, times] of plan) {
      for (let k = 0; k < warmup; k++) await get(agent, `${base}${path}`);
      const samples = [];
      let answer;
      for (let k = 0; k < times; k++) {
        answer = await get(agent, `${base}${path}`);
        if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}`);
        samples.push(answer.ms);
      }
      samples.sort((a, b) => a - b);
      results[name] = {
        path,
        reads: times,
        bytes: answer.bytes,
        p50: round1(percentile(samples, 50)),
        p99: round1(percentile(samples, 99)),
        max: round1(samples.at(-1)),
      };
    }
  } finally {
    agent.destroy();
  }
  return results;
}
