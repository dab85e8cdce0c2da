import type { RequestLogAnswerDto, RequestLogBodyDto, RequestLogDto } from '../../../generated/client/types.gen.js';
import type { LoggedAnswer, LoggedBody, RequestLogEntry } from '../../domain/request-logs/request-log-types.js';

const toBodyDto = (body: LoggedBody): RequestLogBodyDto => ({
  headers: body.headers,
  body: body.body,
  bytes: body.bytes,
  truncated: body.truncated,
});

const toAnswerDto = (answer: LoggedAnswer): RequestLogAnswerDto => ({
  ...toBodyDto(answer),
  status: answer.status,
  assembled: answer.assembled,
  ...(answer.toolCalls
    ? { toolCalls: answer.toolCalls.map((t) => ({ ...(t.id ? { id: t.id } : {}), name: t.name, arguments: t.arguments })) }
    : {}),
});

export function toRequestLogDto(entry: RequestLogEntry): RequestLogDto {
  return {
    invocationId: entry.invocationId,
    workspaceId: entry.workspaceId,
    createdAt: entry.createdAt.toISOString(),
    expiresAt: entry.expiresAt.toISOString(),
    request: toBodyDto(entry.content.request),
    response: entry.content.response ? toAnswerDto(entry.content.response) : null,
  };
}
