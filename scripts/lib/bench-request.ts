/** The benchmarks' chat completion request (bench.ts, bench-stages.ts), JSON or streamed (with its usage asked for). */
export function benchRequestBody(stream: boolean): string {
  return JSON.stringify({
    model: 'bench-model',
    messages: [{ role: 'user', content: 'Say five words.' }],
    max_tokens: 16,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}
