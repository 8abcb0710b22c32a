import { mkdtempSync, rmSync } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline, type Readable, Transform } from 'node:stream';
import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { DeliveriesInFlight } from '../ingress/deliveries-in-flight.js';
import type { MenuForm } from './menu-sections.js';

/** A whole `/menu` body as it was streamed, kept in a file, and the owner version it shows. */
export interface CachedMenu {
  version: string;
  changesCursor: string;
  file: string;
  bytes: number;
  storedAt: number;
}

/** A kept body is read and sent a MiB at a time. */
const CHUNK_BYTES = 1024 * 1024;

/** How long a body is served at most, whatever its version: its `changes_cursor` must stay above the compaction horizon. */
const MAX_AGE_MS = 5 * 60_000;

/**
 * The serialised live `/menu` bodies, per owner and form, each valid while the owner's menu version
 * is unchanged: the projector bumps that version in the same transaction as any change to the
 * owner's rows, so a body of the current version is byte for byte what a new build would stream,
 * and its `changes_cursor` loses nothing to a follower (a change of this owner after it would
 * have bumped the version).
 *
 * Bodies are kept in files (in a directory of MENU_CACHE_DIR made for this process and removed
 * when it stops), not in memory: a large menu is tens of megabytes, and the page cache serves it as
 * well as the heap would without counting against the process. Bounded by MENU_CACHE_MB in all,
 * least recently used out first; a body larger than half of it streams without being kept.
 */
@Injectable()
export class MenuDocumentCache implements OnModuleDestroy {
  private readonly entries = new Map<string, CachedMenu>();
  private bytes = 0;
  private readonly maxBytes: number;
  private readonly maxAgeMs: number;
  private readonly parent: string;
  private dir: string | undefined;
  private serial = 0;
  private readonly yieldMs: number;

  constructor(
    config: AppConfig,
    private readonly deliveries: DeliveriesInFlight,
  ) {
    this.maxBytes = config.MENU_CACHE_MB * 1024 * 1024;
    this.yieldMs = config.MENU_YIELD_MS;
    // A cursor older than the retention could be behind the compaction horizon (410 for a follower).
    this.maxAgeMs = Math.min(MAX_AGE_MS, config.changesRetentionMs / 2);
    this.parent = config.MENU_CACHE_DIR ?? tmpdir();
  }

  /** The entry of `version`, if kept (most recently used from now on). */
  get(ownerId: string, form: MenuForm, version: string, now = Date.now()): CachedMenu | undefined {
    const key = keyOf(ownerId, form);
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.version !== version || now - entry.storedAt > this.maxAgeMs) {
      this.remove(key);
      return undefined;
    }
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry;
  }

  /**
   * The kept body of `version` as a stream, with its `changes_cursor`; undefined when none is kept
   * (or its file is gone). The file is open once this resolves, so dropping it afterwards does not
   * cut a body being sent. Each MiB waits (up to MENU_YIELD_MS) for the webhook deliveries in
   * flight: read from the page cache, a kept body goes out as fast as the client takes it, and the
   * copies to its socket are the daemon's own time.
   */
  async open(
    ownerId: string,
    form: MenuForm,
    version: string,
  ): Promise<{ changesCursor: string; body: Readable } | undefined> {
    const entry = this.get(ownerId, form, version);
    if (entry === undefined) return undefined;
    const handle = await open(entry.file, 'r').catch(() => undefined);
    if (handle === undefined) return undefined;
    const file = handle.createReadStream({ highWaterMark: CHUNK_BYTES });
    if (this.yieldMs === 0) return { changesCursor: entry.changesCursor, body: file };
    const giveWay = new Transform({
      transform: (chunk: Buffer, _encoding, done) => void this.giveWay().then(() => done(null, chunk)),
    });
    // Either side failing or closed early (a client gone) ends both and closes the file.
    return { changesCursor: entry.changesCursor, body: pipeline(file, giveWay, () => undefined) };
  }

  /**
   * A wait before bulk work (a chunk of a `/menu` being built): until no webhook delivery is in
   * flight, or MENU_YIELD_MS, whichever comes first.
   */
  giveWay(): Promise<void> {
    return this.deliveries.quiet(this.yieldMs);
  }

  /**
   * Passes a body's chunks through as it streams and keeps it once it streamed whole (a client
   * gone halfway keeps nothing). The body must be of `version`, read in one snapshot.
   */
  async *keep(
    ownerId: string,
    form: MenuForm,
    version: string,
    changesCursor: string,
    chunks: AsyncIterable<string | Buffer>,
  ): AsyncGenerator<Buffer> {
    const limit = this.maxBytes / 2;
    const storedAt = Date.now();
    let file: { path: string; handle: FileHandle } | undefined = limit > 0 ? await this.create() : undefined;
    let bytes = 0;
    let whole = false;
    // A chunk is written to the file while it is sent (and the next one built); the write before
    // it is awaited first, so the file gets the chunks in order. A write that fails keeps nothing
    // and leaves the answer alone.
    let writing: Promise<boolean> = Promise.resolve(true);
    try {
      for await (const chunk of chunks) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
        if (file !== undefined) {
          bytes += buffer.length;
          if (bytes > limit || !(await writing)) file = await this.discard(file);
          else
            writing = file.handle.write(buffer).then(
              () => true,
              () => false,
            );
        }
        yield buffer;
      }
      whole = file !== undefined && (await writing);
    } finally {
      if (file !== undefined && !whole) file = await this.discard(file);
    }
    if (file === undefined) return;
    await file.handle.close();
    const path = file.path.replace(/\.part$/, '.json');
    await rename(file.path, path);
    const key = keyOf(ownerId, form);
    this.remove(key);
    this.entries.set(key, { version, changesCursor, file: path, bytes, storedAt });
    this.bytes += bytes;
    for (const [oldest] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.remove(oldest);
    }
  }

  onModuleDestroy(): void {
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }

  private async create(): Promise<{ path: string; handle: FileHandle }> {
    this.dir ??= mkdtempSync(join(this.parent, 'menu-sync-menus-'));
    const path = join(this.dir, `${++this.serial}.part`);
    return { path, handle: await open(path, 'wx') };
  }

  private async discard(file: { path: string; handle: FileHandle }): Promise<undefined> {
    await file.handle.close().catch(() => undefined);
    await unlink(file.path).catch(() => undefined);
    return undefined;
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
    void unlink(entry.file).catch(() => undefined);
  }
}

const keyOf = (ownerId: string, form: MenuForm) => `${form}\u0000${ownerId}`;
