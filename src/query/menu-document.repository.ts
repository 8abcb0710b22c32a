import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { readAhead } from '../common/read-ahead.js';
import { LazyPool, preparedQuery, sessionOf, type SqlSession } from '../database/postgres-connection.js';

export type MenuForm = 'expanded' | 'normalized';

/** Rows fetched from a section's cursor at a time: one chunk of the streamed document. */
const FETCH_ROWS = 200;

/** A resource as docs/reference.md §5 shapes it, built as JSON by PostgreSQL (keys in the API's order). */
export const resourceJson = (alias: string, type: string, extra = '') => `json_build_object(
  'type', '${type}', 'id', ${alias}.id, 'owner_id', ${alias}.owner_id, 'attributes', ${alias}.attributes,
  'relationships', ${alias}.relationships,
  'version', json_build_object('event_id', ${alias}.event_id,
    'occurred_at', to_char(${alias}.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'position', ${alias}.position),
  'deleted', ${alias}.deleted${extra})`;

/** The ids of a to-many relationship in order (string or number ids, as the API's expansion reads them): rows (id, ord). */
export const linkedIds = (relationships: string, name: string) => `(
  SELECT link ->> 'id' AS id, ord FROM jsonb_array_elements(
    CASE WHEN jsonb_typeof(${relationships} -> '${name}' -> 'data') = 'array' THEN ${relationships} -> '${name}' -> 'data' ELSE '[]' END)
    WITH ORDINALITY AS l(link, ord)
   WHERE jsonb_typeof(link -> 'id') IN ('string', 'number'))`;

const LIVE_PRODUCTS = `proj_menu.products p WHERE p.owner_id = $1 AND NOT p.deleted`;

/** The trait options of trait `t` in relationship order, unknown and deleted ones left out. */
const TRAIT_OPTIONS = `, 'trait_options', coalesce((
    SELECT json_agg(${resourceJson('o', 'trait_option')} ORDER BY ol.ord)
      FROM ${linkedIds('t.relationships', 'trait_options')} ol JOIN proj_menu.trait_options o ON o.id = ol.id AND NOT o.deleted), '[]'::json)`;

const REFERENCED_TRAITS = `proj_menu.traits t WHERE NOT t.deleted
  AND t.id IN (SELECT tl.id FROM ${LIVE_PRODUCTS.replace('WHERE', `CROSS JOIN LATERAL ${linkedIds('p.relationships', 'traits')} tl WHERE`)})`;

/**
 * Products expanded: each product without its traits (`sql`, with the ids it names in order), and
 * each trait the products name built once by PostgreSQL with its options (`traits`, looked up by
 * the ids a chunk of products names that no earlier chunk did); the process splices the trait
 * texts in (repeats kept, unknown and deleted ones left out). Expanded, a large menu is mostly
 * repeated trait text: built that way, the duplicated text is neither built by
 * PostgreSQL nor sent by it, only written out. Looking traits up by the ids the products already
 * carry costs an index lookup each, far less than a join over every product's relationships.
 */
const EXPANDED_PRODUCTS = {
  key: 'products',
  sql: `SELECT ${resourceJson('p', 'product')}::text AS doc,
               ARRAY(SELECT tl.id FROM ${linkedIds('p.relationships', 'traits')} tl ORDER BY tl.ord) AS traits
          FROM ${LIVE_PRODUCTS} ORDER BY p.sort_key`,
  traits: `SELECT t.id, ${resourceJson('t', 'trait', TRAIT_OPTIONS)}::text AS doc
             FROM proj_menu.traits t WHERE t.id = ANY($1::text[]) AND NOT t.deleted`,
};

/**
 * Each section of the document: its key and the query giving its items (JSON text) in id order
 * ($1: the owner); with `traits`, the items are products whose `traits` ids are spliced in from
 * the docs that query gives for them ($1: trait ids).
 */
export interface MenuSection {
  key: string;
  sql: string;
  traits?: string;
}

const SECTIONS: Record<MenuForm, MenuSection[]> = {
  expanded: [
    {
      key: 'collections',
      sql: `SELECT ${resourceJson('c', 'collection')}::text AS doc FROM proj_menu.collections c
        WHERE c.owner_id = $1 AND NOT c.deleted ORDER BY c.sort_key`,
    },
    EXPANDED_PRODUCTS,
  ],
  normalized: [
    {
      key: 'collections',
      sql: `SELECT ${resourceJson('c', 'collection')}::text AS doc FROM proj_menu.collections c
        WHERE c.owner_id = $1 AND NOT c.deleted ORDER BY c.sort_key`,
    },
    {
      key: 'products',
      sql: `SELECT ${resourceJson('p', 'product')}::text AS doc FROM ${LIVE_PRODUCTS} ORDER BY p.sort_key`,
    },
    {
      key: 'traits',
      sql: `SELECT ${resourceJson('t', 'trait')}::text AS doc FROM ${REFERENCED_TRAITS} ORDER BY t.sort_key`,
    },
    {
      key: 'trait_options',
      sql: `SELECT ${resourceJson('o', 'trait_option')}::text AS doc FROM proj_menu.trait_options o
        WHERE NOT o.deleted AND o.id IN (SELECT ol.id FROM ${REFERENCED_TRAITS.replace('WHERE', `CROSS JOIN LATERAL ${linkedIds('t.relationships', 'trait_options')} ol WHERE`)})
        ORDER BY o.sort_key`,
    },
  ],
};

/** The section queries of a form ($1: the owner), as the daemon runs them (for bench/: the baseline and EXPLAIN snapshots). */
export function menuSections(form: MenuForm): ReadonlyArray<MenuSection> {
  return SECTIONS[form];
}

/** A menu read in one snapshot: the owner's version and the document's sections, streamed. */
export interface MenuSnapshot {
  version: string;
  /** Fields read in the same snapshot and written at the end of the document (`changes_cursor`). */
  trailer: Record<string, unknown>;
  /** The document's JSON text in chunks; the snapshot ends (its connection is released) when it ends or is closed. */
  chunks: AsyncGenerator<string | Buffer>;
  /** Ends the snapshot without reading (idempotent). */
  close(): Promise<void>;
}

/**
 * The live `/menu` document, built by PostgreSQL and read through cursors a few hundred items at
 * a time, in one REPEATABLE READ snapshot that also gives the owner's menu version (the ETag):
 * the process never holds the whole document, and yields to the event loop between chunks.
 */
@Injectable()
export class MenuDocumentRepository implements OnApplicationShutdown {
  /**
   * The sessions documents are built on: a pool of their own (as many as the shared one), so that
   * the next build finds the session the last one ran on (pg's pool hands out the most recently
   * released first), not one the small reads last left. A session's first big read pays for
   * every page of memory it grows into, so a build on a fresh session is far slower than on a warm one
   * (docs/benchmarks.md, Sessions).
   */
  private readonly builds: LazyPool;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.builds = new LazyPool(dataSource, { application_name: 'menu-sync menu' });
  }

  /** Ends the build sessions (after the HTTP server closed: Nest calls this hook last). */
  async onApplicationShutdown(): Promise<void> {
    await this.builds.end();
  }

  /**
   * The owner's menu version ('0' when the projector never touched it): all a 304 costs, so a
   * prepared statement on the pool, without TypeORM's query runner.
   */
  async ownerVersion(ownerId: string): Promise<string> {
    const [row] = await preparedQuery<{ version: string }>(
      this.dataSource,
      `SELECT version::text AS version FROM proj_menu.owner_versions WHERE owner_id = $1`,
      [ownerId],
    );
    return row?.version ?? '0';
  }

  /** The log's head position: what an `as_of` document's ETag rests on (a late event may change the past). */
  async logHead(): Promise<string> {
    const [row] = await this.dataSource.query(`SELECT coalesce(max(position), 0)::text AS head FROM event_log`);
    return row.head;
  }

  /**
   * Opens the owner's document in one REPEATABLE READ snapshot; `trailer` reads, in that snapshot,
   * the fields written after the sections (the change-log cursor consistent with the content).
   */
  async open(
    ownerId: string,
    form: MenuForm,
    trailer: (db: SqlSession) => Promise<Record<string, unknown>> = async () => ({}),
    giveWay: () => Promise<void> = async () => undefined,
  ): Promise<MenuSnapshot> {
    const client = await this.builds.get().connect();
    const session = sessionOf(client);
    let open = true;
    const close = async () => {
      if (!open) return;
      open = false;
      // A session whose ROLLBACK failed is in an unknown state: the pool drops it.
      const failed = await client.query('ROLLBACK').then(
        () => undefined,
        (error: Error) => error,
      );
      client.release(failed);
    };
    try {
      await session.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      // Every row of a cursor is read: plan for all of them, not for the first tenth (the default
      // cursor_tuple_fraction chose nested loops that made a 10,000-product menu take ~2 minutes).
      await session.query('SET LOCAL cursor_tuple_fraction = 1.0');
      const [row] = await session.query(
        `SELECT coalesce((SELECT version FROM proj_menu.owner_versions WHERE owner_id = $1), 0)::text AS version`,
        [ownerId],
      );
      const fields = await trailer(session);
      return {
        version: row.version,
        trailer: fields,
        chunks: this.document(session, ownerId, form, fields, close, giveWay),
        close,
      };
    } catch (error) {
      await close();
      throw error;
    }
  }

  private async *document(
    session: SqlSession,
    ownerId: string,
    form: MenuForm,
    trailer: Record<string, unknown>,
    close: () => Promise<void>,
    giveWay: () => Promise<void>,
  ): AsyncGenerator<string | Buffer> {
    // Each chunk is asked for once `giveWay` lets it: PostgreSQL's share of a build waits too.
    const fetchNext = (cursor: string) =>
      readAhead(giveWay().then(() => fetchRows<SectionRow>(session, cursor, FETCH_ROWS)));
    try {
      let separator = '{';
      for (const [index, section] of SECTIONS[form].entries()) {
        const traits =
          section.traits === undefined
            ? undefined
            : new TraitDocs((ids) => session.query(section.traits as string, [ids]));
        const cursor = `menu_section_${index}`;
        await session.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${section.sql}`, [ownerId]);
        yield `${separator}"${section.key}":[`;
        let first = true;
        let next = fetchNext(cursor);
        for (;;) {
          const rows = await next;
          if (rows.length === 0) break;
          // The chunk's new traits are asked for first; PostgreSQL then builds the next rows while these are written out.
          const named = traits?.load(rows.flatMap((row) => row.traits ?? []));
          next = rows.length < FETCH_ROWS ? Promise.resolve([]) : fetchNext(cursor);
          await named;
          yield traits === undefined
            ? `${first ? '' : ','}${rows.map((row) => row.doc).join(',')}`
            : expandedChunk(rows, traits.docs, first);
          first = false;
        }
        await session.query(`CLOSE ${cursor}`);
        separator = '],';
      }
      yield `]${trailerJson(trailer)}}`;
    } finally {
      await close();
    }
  }
}

/** Expanded trait texts by id (as UTF-8, spliced in as they are), each looked up once. */
export class TraitDocs {
  readonly docs = new Map<string, Buffer>();
  private readonly asked = new Set<string>();

  constructor(private readonly lookup: (ids: string[]) => Promise<Array<{ id: string; doc: string }>>) {}

  /** Looks up the traits of `ids` not asked for yet (unknown and deleted ones stay absent). */
  async load(ids: string[]): Promise<void> {
    const fresh = [...new Set(ids)].filter((id) => !this.asked.has(id));
    if (fresh.length === 0) return;
    for (const id of fresh) this.asked.add(id);
    for (const row of await this.lookup(fresh)) this.docs.set(row.id, Buffer.from(row.doc, 'utf8'));
  }
}

interface SectionRow {
  doc: string;
  traits?: string[];
}

const TRAITS_OPEN = Buffer.from(', "traits" : [');
const ITEM_SEPARATOR = Buffer.from(',');
const TRAIT_SEPARATOR = Buffer.from(', ');
const PRODUCT_END = Buffer.from(']}');

/**
 * Products' JSON texts (objects), each with `"traits" : [...]` appended from the trait texts it
 * names, as one chunk of a document's products array (led by a comma unless `first`). Built from
 * buffers: joining the strings of a large expanded menu and encoding them held the event loop far
 * longer than copying the already encoded trait texts does.
 */
export function expandedChunk(rows: SectionRow[], traits: ReadonlyMap<string, Buffer>, first: boolean): Buffer {
  const parts: Buffer[] = [];
  for (const [index, row] of rows.entries()) {
    if (index > 0 || !first) parts.push(ITEM_SEPARATOR);
    parts.push(Buffer.from(row.doc.slice(0, -1), 'utf8'), TRAITS_OPEN);
    let named = 0;
    for (const id of row.traits ?? []) {
      const doc = traits.get(id);
      if (doc === undefined) continue;
      if (named++ > 0) parts.push(TRAIT_SEPARATOR);
      parts.push(doc);
    }
    parts.push(PRODUCT_END);
  }
  return Buffer.concat(parts);
}

/** `,"key":value` for each field, to close a document with. */
export function trailerJson(fields: Record<string, unknown>): string {
  return Object.entries(fields)
    .map(([key, value]) => `,${JSON.stringify(key)}:${JSON.stringify(value)}`)
    .join('');
}

function fetchRows<T>(session: SqlSession, cursor: string, rows: number): Promise<T[]> {
  return session.query<T>(`FETCH ${rows} FROM ${cursor}`);
}
