import { randomUUID } from 'node:crypto';
import pg from 'pg';

export interface ChangeInput {
  type: string;
  id: string;
  ownerId?: string;
  op?: 'upsert' | 'delete';
  attributes?: Record<string, unknown>;
}

/**
 * Writes change-log rows directly (what the projector writes in its page transaction), one
 * transaction per call, to drive sinks without events. Answers the rows as inserted.
 */
export async function insertChanges(
  databaseUrl: string,
  inputs: ChangeInput[],
): Promise<Array<{ seq: number; change_id: string; type: string; id: string }>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const rows = inputs.map((input, index) => {
      const op = input.op ?? 'upsert';
      const ownerId = input.ownerId ?? '42';
      const eventId = randomUUID();
      const resource = {
        type: input.type,
        id: input.id,
        owner_id: ownerId,
        attributes: input.attributes ?? { name: `${input.type} ${input.id} #${index}` },
        relationships: {},
        version: { event_id: eventId, occurred_at: new Date().toISOString(), position: index + 1 },
        deleted: op === 'delete',
      };
      return [randomUUID(), input.type, input.id, ownerId, op, JSON.stringify(resource)];
    });
    const { rows: inserted } = await client.query(
      `INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
       RETURNING seq::int AS seq, change_id, type, id`,
      [0, 1, 2, 3, 4, 5].map((column) => rows.map((row) => row[column])),
    );
    return inserted;
  } finally {
    await client.end();
  }
}

/** The newest change of each resource, keyed `type/id`: what a sink's target should end up with. */
export function newestByResource<T extends { type: string; id: string; seq: number }>(changes: T[]): Map<string, T> {
  const newest = new Map<string, T>();
  for (const change of changes) {
    const key = `${change.type}/${change.id}`;
    if ((newest.get(key)?.seq ?? -1) < change.seq) newest.set(key, change);
  }
  return newest;
}

export async function sqlQuery(databaseUrl: string, sql: string, params: unknown[] = []): Promise<any[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}
