import type { Readable } from 'node:stream';
import { Inject, Injectable } from '@nestjs/common';
import { encodeChangeCursor } from '../changes/change-cursor.js';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { inChunks } from '../common/in-chunks.js';
import { readAhead } from '../common/read-ahead.js';
import { replicaOf } from '../database/read-replica.js';
import { onSide, type ReadSide } from '../database/read-router.service.js';
import { ArchiveHorizonService } from '../event-log/archive-horizon.service.js';
import { RESOURCE_TABLES, ResourceTable } from '../projection/resource-tables.js';
import { ReadModelRepository, ResourceDoc } from '../query/read-model.repository.js';
import { expandedChunk, trailerJson, TraitDocs } from './document-text.js';
import { MenuDocumentCache } from './menu-document.cache.js';
import { MenuDocumentRepository } from './menu-document.repository.js';
import type { MenuForm } from './menu-sections.js';

export type MenuAnswer =
  | { etag: string; notModified: true }
  | {
      etag: string;
      notModified: false;
      changesCursor: string | null;
      chunks: AsyncIterable<string | Buffer> | Readable;
      close?: () => Promise<void>;
    };

/** Products per chunk of an `as_of` menu: each chunk is folded, expanded and serialised on its own. */
const MENU_CHUNK = 250;
/** Ids per lookup of traits and trait options, and lookups in flight at once, for an `as_of` menu. */
const LOOKUP_CHUNKS = { size: 500, concurrency: 3 };

/** The menu document (docs/reference.md §5), live or `as_of`, read on the side it is given (ReadRouter decides). */
@Injectable()
export class MenuDocumentService {
  constructor(
    private readonly rows: ReadModelRepository,
    private readonly documents: MenuDocumentRepository,
    private readonly changes: ChangeLogRepository,
    private readonly cache: MenuDocumentCache,
    @Inject(replicaOf(ReadModelRepository)) private readonly replicaRows: ReadModelRepository | null,
    @Inject(replicaOf(MenuDocumentRepository)) private readonly replicaDocuments: MenuDocumentRepository | null,
    private readonly horizon: ArchiveHorizonService,
  ) {}

  /**
   * `/menu`: every live collection and product of an owner, products expanded (or, `normalized`,
   * products, traits and trait options each listed once). The ETag is the owner's menu version,
   * which the projector bumps in the same transaction as any change to the owner's rows, so an
   * `If-None-Match` that matches costs one index lookup and no body. The body streams in chunks,
   * and is kept (MenuDocumentCache) for the next reads of the same version.
   */
  async menu(
    ownerId: string,
    form: MenuForm,
    ifNoneMatch: string | undefined,
    asOf?: Date,
    side: ReadSide = 'primary',
  ): Promise<MenuAnswer> {
    const documents = onSide(side, this.documents, this.replicaDocuments);
    this.horizon.checkAsOf(asOf);
    if (asOf !== undefined)
      return this.menuAsOfAnswer(
        ownerId,
        form,
        ifNoneMatch,
        asOf,
        documents,
        onSide(side, this.rows, this.replicaRows),
      );
    const version = await documents.ownerVersion(ownerId);
    const current = menuEtag(version, form);
    if (matches(ifNoneMatch, current)) return { etag: current, notModified: true };
    const kept = await this.cache.open(ownerId, form, version);
    if (kept !== undefined)
      return { etag: current, notModified: false, changesCursor: kept.changesCursor, chunks: kept.body };
    const snapshot = await documents.open(
      ownerId,
      form,
      async (db) => ({ changes_cursor: encodeChangeCursor(await this.changes.positionInSnapshot(db)) }),
      () => this.cache.giveWay(),
    );
    const etag = menuEtag(snapshot.version, form);
    if (matches(ifNoneMatch, etag)) {
      await snapshot.close();
      return { etag, notModified: true };
    }
    const changesCursor = snapshot.trailer.changes_cursor as string;
    return {
      etag,
      notModified: false,
      changesCursor,
      close: snapshot.close,
      chunks: this.cache.keep(ownerId, form, snapshot.version, changesCursor, snapshot.chunks),
    };
  }

  private async menuAsOfAnswer(
    ownerId: string,
    form: MenuForm,
    ifNoneMatch: string | undefined,
    asOf: Date,
    documents: MenuDocumentRepository,
    readModel: ReadModelRepository,
  ): Promise<MenuAnswer> {
    // The past can still change (an older event arriving late leaves the live rows alone): the
    // ETag rests on the log's head, not on the owner's version.
    const etag = menuEtag(`asof-${await documents.logHead()}`, form, asOf);
    if (matches(ifNoneMatch, etag)) return { etag, notModified: true };
    return { etag, notModified: false, changesCursor: null, chunks: this.menuAsOf(ownerId, form, asOf, readModel) };
  }

  /**
   * The menu as of an instant, folded from the log a chunk of products at a time, each resource as
   * the JSON text PostgreSQL builds (findDocsAsOf) and the document spliced from those texts as the
   * live one is. Each trait (with its options) is folded and its text built once per document
   * (products share them), a few lookups at a time; the next chunk of products is folded while
   * this one is expanded.
   */
  private async *menuAsOf(
    ownerId: string,
    form: MenuForm,
    asOf: Date,
    readModel: ReadModelRepository,
  ): AsyncGenerator<string | Buffer> {
    const archiveBase = this.horizon.archived;
    const collections = await readModel.findDocsAsOf(RESOURCE_TABLES.collection, { ownerId, asOf, archiveBase });
    yield `{"collections":[${collections.map((row) => row.doc).join(',')}],"products":[`;
    const traits = new TraitTexts(
      (table, ids, links) =>
        inChunks(
          ids,
          (chunk) => readModel.findDocsAsOf(table, { ids: chunk, asOf, archiveBase }, links),
          LOOKUP_CHUNKS,
        ),
      form,
    );
    const chunkAfter = (after: string | undefined) =>
      readAhead(
        readModel.findDocsAsOf(
          RESOURCE_TABLES.product,
          { ownerId, asOf, archiveBase, afterSortKey: after, limit: MENU_CHUNK },
          'traits',
        ),
      );
    let next = chunkAfter(undefined);
    let first = true;
    for (;;) {
      const rows = await next;
      if (rows.length === 0) break;
      next = rows.length < MENU_CHUNK ? Promise.resolve([]) : chunkAfter(rows[rows.length - 1].sort_key);
      await traits.expanded.load(rows.flatMap((row) => row.links));
      yield form === 'normalized'
        ? `${first ? '' : ','}${rows.map((row) => row.doc).join(',')}`
        : expandedChunk(
            rows.map((row) => ({ doc: row.doc, traits: row.links })),
            traits.expanded.docs,
            first,
          );
      first = false;
    }
    yield `]${traits.closing()}${trailerJson({ changes_cursor: null })}}`;
  }
}

/**
 * The traits of an `as_of` menu and their options as JSON texts (ResourceDoc), each trait looked up
 * once (TraitDocs; unknown and deleted ones left out). Expanded: `expanded` holds each trait's
 * text with its options spliced in, in relationship order (repeats kept), ready for expandedChunk,
 * and nothing else is kept (an option named by two traits is looked up for each). Normalized: the
 * texts are kept for `closing`, and none is spliced. (Options outnumber traits: keeping both forms'
 * texts would raise the daemon's peak memory for nothing.)
 */
class TraitTexts {
  readonly expanded: TraitDocs;
  private readonly traits: ResourceDoc[] = [];
  private readonly options = new Map<string, ResourceDoc>();

  constructor(
    lookup: (table: ResourceTable, ids: string[], links?: string) => Promise<ResourceDoc[]>,
    private readonly form: MenuForm,
  ) {
    this.expanded = new TraitDocs(async (ids) => {
      const traits = await lookup(RESOURCE_TABLES.trait, ids, 'trait_options');
      const optionIds = traits.flatMap((trait) => trait.links).filter((id) => !this.options.has(id));
      const options = new Map(
        (await lookup(RESOURCE_TABLES.trait_option, optionIds)).map((option) => [option.id, option]),
      );
      if (form === 'normalized') {
        for (const option of options.values()) this.options.set(option.id, option);
        this.traits.push(...traits);
        return [];
      }
      return traits.map((trait) => {
        const docs = trait.links.flatMap((id) => options.get(id)?.doc ?? []);
        return { id: trait.id, doc: `${trait.doc.slice(0, -1)}, "trait_options" : [${docs.join(', ')}]}` };
      });
    });
  }

  /**
   * What follows the products: nothing when expanded; normalized, the traits folded so far and
   * their options, each listed once in id order.
   */
  closing(): string {
    if (this.form !== 'normalized') return '';
    const inOrder = (docs: ResourceDoc[]) =>
      docs.sort((a, b) => (a.sort_key < b.sort_key ? -1 : a.sort_key > b.sort_key ? 1 : 0)).map((doc) => doc.doc);
    return `,"traits":[${inOrder([...this.traits]).join(',')}],"trait_options":[${inOrder([...this.options.values()]).join(',')}]`;
  }
}

function menuEtag(version: string, form: MenuForm, asOf?: Date): string {
  return `"menu-${version}-${form === 'normalized' ? 'n' : 'e'}${asOf === undefined ? '' : `-${asOf.getTime()}`}"`;
}

function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  return ifNoneMatch?.split(',').some((tag) => tag.trim() === etag || tag.trim() === `W/${etag}`) ?? false;
}
