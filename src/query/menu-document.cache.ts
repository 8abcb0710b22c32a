import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import type { MenuForm } from './menu-document.repository.js';

/** A whole `/menu` body as it was streamed, and the owner version it shows. */
export interface CachedMenu {
  version: string;
  changesCursor: string;
  chunks: Buffer[];
  bytes: number;
  storedAt: number;
}

/** How long a body is served at most, whatever its version: its `changes_cursor` must stay above the compaction horizon. */
const MAX_AGE_MS = 5 * 60_000;

/**
 * The serialised live `/menu` bodies, per owner and form, each valid while the owner's menu version
 * is unchanged: the projector bumps that version in the same transaction as any change to the
 * owner's rows, so a body of the current version is byte for byte what a new build would stream,
 * and its `changes_cursor` loses nothing to a follower (a change of this owner after it would
 * have bumped the version). Bounded by MENU_CACHE_MB in all, least recently used out first; a
 * body larger than a quarter of it streams without being kept.
 */
@Injectable()
export class MenuDocumentCache {
  private readonly entries = new Map<string, CachedMenu>();
  private bytes = 0;
  private readonly maxBytes: number;
  private readonly maxAgeMs: number;

  constructor(config: AppConfig) {
    this.maxBytes = config.MENU_CACHE_MB * 1024 * 1024;
    // A cursor older than the retention could be behind the compaction horizon (410 for a follower).
    this.maxAgeMs = Math.min(MAX_AGE_MS, config.changesRetentionMs / 2);
  }

  /** The body of `version`, if kept. */
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
   * Passes a body's chunks through as it streams and keeps it once it streamed whole (a client
   * gone halfway keeps nothing). The body must be of `version`, read in one snapshot.
   */
  async *keep(ownerId: string, form: MenuForm, version: string, changesCursor: string, chunks: AsyncIterable<string>): AsyncGenerator<Buffer> {
    const limit = this.maxBytes / 4;
    let kept: Buffer[] | null = [];
    let bytes = 0;
    const storedAt = Date.now();
    for await (const chunk of chunks) {
      const buffer = Buffer.from(chunk, 'utf8');
      if (kept !== null) {
        bytes += buffer.length;
        if (bytes > limit) kept = null;
        else kept.push(buffer);
      }
      yield buffer;
    }
    if (kept === null) return;
    const key = keyOf(ownerId, form);
    this.remove(key);
    this.entries.set(key, { version, changesCursor, chunks: kept, bytes, storedAt });
    this.bytes += bytes;
    for (const [oldest] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.remove(oldest);
    }
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}

const keyOf = (ownerId: string, form: MenuForm) => `${form}\u0000${ownerId}`;
