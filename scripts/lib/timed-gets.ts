/**
 * A client in its own process, as a real one is: `node --import tsx scripts/lib/timed-gets.ts URL RUNS`, with the
 * request's headers as JSON on stdin. It GETs URL 3 times to warm up, then RUNS times, each until the answer's last
 * byte is read, and prints the times in milliseconds (a JSON array), or exits 1 on an answer that is not 200.
 *
 * It reads with undici's `request`, not `fetch`: a real client runs on another host, but this one shares the server's
 * two cores, and fetch's web streams took twice the CPU to read the largest summary (7.5 MB; 46-64 ms a read against
 * 22-25, docs/performance.md), time the server's answer then waited for. What is timed is the server's answer, with as
 * little of the client's work as a Node client adds.
 */
import { text } from 'node:stream/consumers';
import { request } from 'undici';

const [url, runs] = process.argv.slice(2);
const headers = JSON.parse(await text(process.stdin)) as Record<string, string>;
const times: number[] = [];
for (let i = 0; i < Number(runs) + 3; i++) {
  const started = performance.now();
  const res = await request(url!, { headers });
  for await (const chunk of res.body) void chunk;
  if (res.statusCode !== 200) {
    console.error(`${url}: ${res.statusCode}`);
    process.exit(1);
  }
  if (i >= 3) times.push(performance.now() - started);
}
console.log(JSON.stringify(times));
