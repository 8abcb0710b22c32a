import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { constants, createBrotliCompress, createBrotliDecompress } from 'node:zlib';

/** What a file's lines add up to: the digests its manifest entry and its archive row hold. */
export interface LinesDigest {
  events: number;
  firstPosition: number | null;
  lastPosition: number | null;
  /** SHA-256 of the entries' `sha256` column, in position order (hex). */
  eventsSha256: string;
  /** SHA-256 of the SHA-256 of each line, in position order (hex). */
  rowsSha256: string;
}

export interface WrittenFile extends LinesDigest {
  bytes: number;
  /** SHA-256 of the file's bytes, compressed (hex). */
  sha256: string;
}

/** Brotli at quality 5 with a 4 MiB window: within 3 % of quality 9 at a quarter of its time (docs/benchmarks.md, The archive). */
const COMPRESSION = {
  chunkSize: 256 * 1024,
  params: {
    [constants.BROTLI_PARAM_QUALITY]: 5,
    [constants.BROTLI_PARAM_LGWIN]: 22,
    [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
  },
};

/** Folds lines into the digests, one at a time (a line is `event_log_archive_lines`'s: JSON of one entry). */
export class LinesDigester {
  private readonly events = createHash('sha256');
  private readonly rows = createHash('sha256');
  private count = 0;
  private first: number | null = null;
  private last: number | null = null;

  add(line: string): void {
    const entry = JSON.parse(line) as { position: number; sha256: string };
    if (this.last !== null && entry.position <= this.last) throw new Error(`position ${entry.position} out of order`);
    this.first ??= entry.position;
    this.last = entry.position;
    this.count++;
    this.events.update(Buffer.from(entry.sha256.slice(2), 'hex'));
    this.rows.update(createHash('sha256').update(line, 'utf8').digest());
  }

  digest(): LinesDigest {
    return {
      events: this.count,
      firstPosition: this.first,
      lastPosition: this.last,
      eventsSha256: this.events.digest('hex'),
      rowsSha256: this.rows.digest('hex'),
    };
  }
}

/**
 * Writes the lines `pages` yields to `path`, brotli-compressed, through a temporary name, fsynced
 * and renamed: a file at `path` is always whole. Memory stays at one page and the compressor's window.
 */
export async function writeLines(path: string, pages: AsyncIterable<string[]>): Promise<WrittenFile> {
  const temporary = `${path}.partial`;
  const handle = await open(temporary, 'w');
  const fileHash = createHash('sha256');
  const digester = new LinesDigester();
  let bytes = 0;
  try {
    const compressor = createBrotliCompress(COMPRESSION);
    const written = (async () => {
      for await (const chunk of compressor as AsyncIterable<Buffer>) {
        fileHash.update(chunk);
        bytes += chunk.length;
        await handle.write(chunk);
      }
    })();
    try {
      for await (const lines of pages) {
        for (const line of lines) digester.add(line);
        if (lines.length === 0) continue;
        if (!compressor.write(`${lines.join('\n')}\n`))
          await new Promise((resolve) => compressor.once('drain', resolve));
      }
      compressor.end();
    } catch (error) {
      compressor.destroy(error as Error);
      throw error;
    } finally {
      await written;
    }
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  await rename(temporary, path);
  await syncDirectory(path);
  return { ...digester.digest(), bytes, sha256: fileHash.digest('hex') };
}

/**
 * Reads `path` back: the SHA-256 and size of its bytes, and each line (in batches of `batch`) to
 * `onLines` when given, with the lines' digests.
 */
export async function readLines(
  path: string,
  onLines: (lines: string[]) => Promise<void> = async () => undefined,
  batch = 500,
): Promise<WrittenFile> {
  const fileHash = createHash('sha256');
  const digester = new LinesDigester();
  let bytes = 0;
  const source = createReadStream(path);
  const decompressor = createBrotliDecompress();
  source.on('data', (chunk) => {
    fileHash.update(chunk as Buffer);
    bytes += chunk.length;
  });
  source.on('error', (error) => decompressor.destroy(error));
  source.pipe(decompressor);
  const decoder = new StringDecoder('utf8');
  let rest = '';
  let pending: string[] = [];
  for await (const chunk of decompressor as AsyncIterable<Buffer>) {
    const lines = (rest + decoder.write(chunk)).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      digester.add(line);
      pending.push(line);
    }
    if (pending.length >= batch) {
      await onLines(pending);
      pending = [];
    }
  }
  rest += decoder.end();
  if (rest !== '') throw new Error(`${path} ends within a line`);
  if (pending.length > 0) await onLines(pending);
  return { ...digester.digest(), bytes, sha256: fileHash.digest('hex') };
}

async function syncDirectory(path: string): Promise<void> {
  const directory = await open(path.slice(0, Math.max(path.lastIndexOf('/'), 1)), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}
