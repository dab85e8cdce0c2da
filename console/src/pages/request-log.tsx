/**
 * A call's request log on its page (docs/request-logs.md): its request and its answer as kept (a stream's answer
 * assembled: its text and tool calls), each body cut at its policy's cap. A call that kept none says why it may not
 * have; a person whose role may not read bodies is told so.
 */
import { useEffect, useState } from 'preact/hooks';
import { getInvocationLog, NexusError, type Client, type RequestLogBodyDto, type RequestLogDto } from '../api.js';
import { formatNumber, when } from '../format.js';
import { Empty } from '../ui.js';

type Shown = { log: RequestLogDto } | { missing: string } | undefined;

/** A body as JSON when it parses (indented), else as it was kept. */
function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function Body({ title, part }: { title: string; part: RequestLogBodyDto }) {
  const headers = Object.entries(part.headers);
  return (
    <>
      <h4>{title}</h4>
      {headers.length ? (
        <p class="id">
          {headers.map(([name, value]) => (
            <span key={name}>
              {name}: {value}
              <br />
            </span>
          ))}
        </p>
      ) : null}
      <p>
        {formatNumber(part.bytes)} bytes
        {part.truncated ? <strong> · cut at the policy's cap: what is shown is its start</strong> : null}
      </p>
      {part.body ? <pre class="request-log-body">{pretty(part.body)}</pre> : <Empty>Empty.</Empty>}
    </>
  );
}

export function RequestLog({ client, invocationId }: { client: Client; invocationId: string }) {
  const [shown, setShown] = useState<Shown>();
  useEffect(() => {
    let latest = true;
    setShown(undefined);
    getInvocationLog({ client, path: { invocationId } })
      .then(({ data }) => latest && setShown({ log: data }))
      .catch((err: unknown) => {
        if (!latest) return;
        if (err instanceof NexusError && err.status === 404)
          setShown({
            missing:
              'No request log was kept for this call: no policy keeps them, it was not sampled, it succeeded under "failed only", or it expired.',
          });
        else if (err instanceof NexusError && err.status === 403) setShown({ missing: 'Your role may not read request logs.' });
        else setShown({ missing: `The request log could not be read (${err instanceof Error ? err.message : String(err)}).` });
      });
    return () => {
      latest = false;
    };
  }, [invocationId]);
  if (!shown) return null;
  if ('missing' in shown)
    return (
      <>
        <h3>Request and answer</h3>
        <Empty>{shown.missing}</Empty>
      </>
    );
  const { log } = shown;
  const answer = log.response;
  return (
    <>
      <h3>Request and answer</h3>
      <p>Kept until {when(log.expiresAt)}.</p>
      <Body title="Request" part={log.request} />
      {answer ? (
        <>
          <Body title={`Answer (HTTP ${answer.status ?? '—'}${answer.assembled ? ', a stream: its text assembled' : ''})`} part={answer} />
          {answer.toolCalls?.length ? (
            <>
              <h4>Tool calls</h4>
              {answer.toolCalls.map((call, i) => (
                <pre key={i} class="request-log-body">
                  {call.name}({pretty(call.arguments)})
                </pre>
              ))}
            </>
          ) : null}
        </>
      ) : (
        <Empty>No answer: the call was refused before a provider was called, or the provider did not answer.</Empty>
      )}
    </>
  );
}
