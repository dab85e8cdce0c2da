/**
 * A client in its own process, as a real one is: `node --import tsx scripts/lib/timed-gets.ts URL RUNS`, with the
 * request's headers as JSON on stdin. It GETs URL 3 times to warm up, then RUNS times, each until the answer's last
 * byte is read, and prints the times in milliseconds (a JSON array), or exits 1 on an answer that is not 200.
 */
import { text } from 'node:stream/consumers';

const [url, runs] = process.argv.slice(2);
const headers = JSON.parse(await text(process.stdin)) as Record<string, string>;
const times: number[] = [];
for (let i = 0; i < Number(runs) + 3; i++) {
  const started = performance.now();
  const res = await fetch(url!, { headers });
  await res.arrayBuffer();
  if (res.status !== 200) {
    console.error(`${url}: ${res.status}`);
    process.exit(1);
  }
  if (i >= 3) times.push(performance.now() - started);
}
console.log(JSON.stringify(times));
