import type {
  ListSessionsData,
  ListSessionsResponses,
  RevokeSessionData,
  RevokeSessionResponses,
  SessionDto,
} from '../../../generated/client/types.gen.js';
import type { SessionWithPerson } from '../../domain/people/session-repo.js';
import type { Services } from '../../domain/services.js';
import { handler, noContent, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';

/** A session as the wire shows it: never its token or its ID token. */
function toSessionDto(row: SessionWithPerson): SessionDto {
  return {
    id: row.id,
    person: { issuer: row.issuer, subject: row.subject, email: row.email, name: row.name },
    provider: row.provider,
    owner: row.is_owner,
    createdAt: row.created_at.toISOString(),
    lastSeenAt: row.last_seen_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

export function peopleHandlers({ people }: Services): HandlerMap {
  return {
    listSessions: handler<ListSessionsData, ListSessionsResponses>(async ({ actor, query }) => {
      const result = await people.sessions.list(actor, listQuery(query ?? {}));
      return page(result.items.map(toSessionDto), result.nextAfter);
    }),
    revokeSession: handler<RevokeSessionData, RevokeSessionResponses>(async ({ actor, path }) => {
      await people.sessions.revoke(actor, path.sessionId);
      return noContent();
    }),
  };
}
