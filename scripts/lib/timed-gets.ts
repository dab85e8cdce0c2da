/**
 * A client in its own process, as a real one is: `node --import tsx scripts/lib/timed-gets.ts RUNS URL [URL ...]`,
 * with the requests' headers as JSON on stdin. It GETs each URL 3 times to warm up, then RUNS times, each until the
 * answer's last byte is read, and prints the times in milliseconds (a JSON array per URL, in the URLs' order), or exits
 * 1 on an answer that is not 200. With several URLs, each round asks every URL once, in turn, the order reversed every
 * other round: the host's moment weighs on each alike, and a round's times compare.
 *
 * It reads with undici's `request`, not `fetch`: a real client runs on another host, but this one shares the server's
 * two cores, and fetch's web streams took twice the CPU to read the largest summary (7.5 MB; 46-64 ms a read against
 * 22-25, docs/performance.md), time the server's answer then waited for. What is timed is the server's answer, with as
 * little of the client's work as a Node client adds.
 */
import { text } from 'node:stream/consumers';
import { request } from 'undici';

const [runs, ...urls] = process.argv.slice(2);
const headers = JSON.parse(await text(process.stdin)) as Record<string, string>;

async function timedGet(url: string): Promise<number> {
  const started = performance.now();
  const res = await request(url, { headers });
  for await (const chunk of res.body) void chunk;
  if (res.statusCode !== 200) {
    console.error(`${url}: ${res.statusCode}`);
    process.exit(1);
  }
  return performance.now() - started;
}

const times = urls.map((): number[] => []);
for (let round = 0; round < Number(runs) + 3; round++) {
  const order = urls.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const i of order) {
    const ms = await timedGet(urls[i]!);
    if (round >= 3) times[i]!.push(ms);
  }
}
console.log(JSON.stringify(times));
