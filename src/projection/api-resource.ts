/**
 * A resource as the query API shows it (docs/reference.md §5) and as a change carries it (§11). The read
 * model's public shape: the query service builds it from rows, `menu_sync_resource()` in SQL.
 */
export interface ApiResource {
  type: string;
  id: string;
  owner_id: string | null;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  version: { event_id: string; occurred_at: string; position: number };
  deleted: boolean;
  [expansion: string]: unknown;
}
