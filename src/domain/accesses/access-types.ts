export type AccessStatus = 'PENDING' | 'ACTIVE' | 'SUSPENDED' | 'EXPIRED' | 'REVOKED';

export interface WorkspaceUserRow {
  id: string;
  workspace_id: string;
  external_user_id: string;
  email: string;
  name: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

export interface AccessRow {
  id: string;
  workspace_id: string;
  user_id: string;
  plan_id: string;
  status: AccessStatus;
  access_starts_at: Date;
  access_ends_at: Date | null;
  metadata: Record<string, unknown>;
  status_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** An access with the user fields its DTOs show. */
export interface AccessView extends AccessRow {
  external_user_id: string;
  email: string;
  user_name: string | null;
  user_created_at: Date;
}
