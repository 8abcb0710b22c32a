import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { readAhead } from '../common/read-ahead.js';
import { LazyPool, preparedQuery, sessionOf, type SqlSession } from '../database/postgres-connection.js';
import { expandedChunk, type SectionRow, trailerJson, TraitDocs } from './document-text.js';
import { type MenuForm, type MenuSection, menuSections } from './menu-sections.js';

/** Rows fetched from a section's cursor at a time: one chunk of the streamed document. */
const FETCH_ROWS = 200;

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
    try {
      let separator = '{';
      for (const [index, section] of menuSections(form).entries()) {
        yield* sectionChunks(
          session,
          section,
          `menu_section_${index}`,
          ownerId,
          `${separator}"${section.key}":[`,
          giveWay,
        );
        separator = '],';
      }
      yield `]${trailerJson(trailer)}}`;
    } finally {
      await close();
    }
  }
}

/** A section's items read through `cursor` (its `opening` written once the cursor is declared), in chunks of FETCH_ROWS. */
async function* sectionChunks(
  session: SqlSession,
  section: MenuSection,
  cursor: string,
  ownerId: string,
  opening: string,
  giveWay: () => Promise<void>,
): AsyncGenerator<string | Buffer> {
  // Each chunk is asked for once `giveWay` lets it: PostgreSQL's share of a build waits too.
  const fetchNext = () => readAhead(giveWay().then(() => fetchRows<SectionRow>(session, cursor, FETCH_ROWS)));
  const traits =
    section.traits === undefined ? undefined : new TraitDocs((ids) => session.query(section.traits as string, [ids]));
  await session.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${section.sql}`, [ownerId]);
  yield opening;
  let first = true;
  let next = fetchNext();
  for (;;) {
    const rows = await next;
    if (rows.length === 0) break;
    // The chunk's new traits are asked for first; PostgreSQL then builds the next rows while these are written out.
    const named = traits?.load(rows.flatMap((row) => row.traits ?? []));
    next = rows.length < FETCH_ROWS ? Promise.resolve([]) : fetchNext();
    await named;
    yield traits === undefined
      ? `${first ? '' : ','}${rows.map((row) => row.doc).join(',')}`
      : expandedChunk(rows, traits.docs, first);
    first = false;
  }
  await session.query(`CLOSE ${cursor}`);
}

function fetchRows<T>(session: SqlSession, cursor: string, rows: number): Promise<T[]> {
  return session.query<T>(`FETCH ${rows} FROM ${cursor}`);
}
